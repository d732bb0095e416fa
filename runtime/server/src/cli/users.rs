//! `service-runtime users ...`: people with local accounts, written to the data directory's
//! database. A new user (or one whose password is reset) gets a one-time link to set a
//! password, printed alone on the last line.

use std::path::Path;

use crate::access::{Principal, Role, erasure, links, users};
use crate::app;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT, FileConfig};
use crate::replica;
use crate::settings_store::SettingsStore;
use clap::Subcommand;

#[derive(Subcommand)]
pub(super) enum UsersCommand {
    /// Add a person with a local account; prints a one-time link to set their password
    Add {
        /// Their sign-in name (letters, digits, '-', '_', '.', '@')
        name: String,
        /// admin, operator, member or viewer
        #[arg(long)]
        role: String,
    },
    /// List people (never a password)
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Print a new one-time link to set a local user's password
    Link { name: String },
    /// Remove a person; their sessions end
    Remove { name: String },
    /// Forget a person: their conversations, what they wrote in their runs' traces, their
    /// tasks' prompts and their approvals' notes go, and then their account; counts stay, and
    /// the audit log says they were forgotten
    Forget { name: String },
}

pub(super) async fn run(data_dir: &Path, command: UsersCommand) -> anyhow::Result<()> {
    let env = SettingsStore::load(data_dir)?;
    let config = FileConfig::load(data_dir)?;
    let db = app::open_db(data_dir, &env, &config).await?;
    // Where the person will open the link: the public address, else the running server's,
    // else the configured bind.
    let base = config
        .server
        .public_url
        .clone()
        .or_else(|| std::fs::read_to_string(data_dir.join("server.url")).ok())
        .map(|url| url.trim().trim_end_matches('/').to_owned())
        .unwrap_or_else(|| {
            let host = config.server.host.as_deref().unwrap_or(DEFAULT_HOST);
            format!(
                "http://{host}:{}",
                config.server.port.unwrap_or(DEFAULT_PORT)
            )
        });
    match command {
        UsersCommand::Add { name, role } => {
            let role = Role::parse(&role, "role")?;
            let (user, secret) =
                db.blocking(|conn| links::invite(conn, &name, role, "owner (command line)"))?;
            outln!(
                "added {:?} ({}); they set a password within 7 days with this link (it works once):",
                user.name,
                user.role
            )?;
            outln!("{base}/#link={secret}")
        }
        UsersCommand::List { json } => {
            let users = db.blocking(|conn| users::list(conn))?;
            if json {
                return outln!("{}", serde_json::to_string_pretty(&users)?);
            }
            if users.is_empty() {
                return outln!("no users; add one with `service-runtime users add NAME --role R`");
            }
            outln!(
                "{:<32} {:<9} {:<6} {:<9} {:<25} LAST SIGN-IN",
                "NAME",
                "ROLE",
                "SOURCE",
                "PASSWORD",
                "CREATED"
            )?;
            for u in &users {
                outln!(
                    "{:<32} {:<9} {:<6} {:<9} {:<25} {}",
                    u.name,
                    u.role,
                    u.source.as_str(),
                    if u.has_password { "set" } else { "-" },
                    u.created_at,
                    u.last_sign_in_at.as_deref().unwrap_or("never")
                )?;
            }
            Ok(())
        }
        UsersCommand::Link { name } => {
            let secret = db.blocking(|conn| links::reset(conn, &name))?;
            outln!("a link for {name:?} to set a new password within 7 days (it works once):")?;
            outln!("{base}/#link={secret}")
        }
        UsersCommand::Remove { name } => {
            db.blocking(|conn| users::remove(conn, &name))?;
            outln!("removed {name:?}; their sessions ended")
        }
        UsersCommand::Forget { name } => {
            let replica = replica::command_id();
            let forgotten =
                db.blocking(|conn| erasure::forget(conn, &name, &Principal::owner(), &replica))?;
            outln!(
                "forgot {name:?}: {} conversations deleted; what was written in {} runs, {} \
                 tasks' prompts and {} approvals' notes erased; their account removed",
                forgotten.conversations,
                forgotten.runs,
                forgotten.tasks,
                forgotten.approvals
            )
        }
    }
}
