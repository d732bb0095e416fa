//! `service-runtime tokens ...`: API tokens, written to the data directory's database (a
//! running server takes a change within a second).

use std::path::Path;

use crate::access::Role;
use crate::access::tokens::{self, NewToken};
use crate::app;
use crate::config::FileConfig;
use crate::settings_store::SettingsStore;
use clap::Subcommand;

#[derive(Subcommand)]
pub(super) enum TokensCommand {
    /// Create a token; its secret is printed once, alone on the last line
    Create {
        /// A name to list and revoke it by
        #[arg(long)]
        name: String,
        /// admin, operator, member or viewer
        #[arg(long)]
        role: String,
        /// A life such as 30d, 12h or 45m [default: until revoked]
        #[arg(long)]
        expires: Option<String>,
    },
    /// List tokens (never their secrets)
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: it is refused from then on
    Revoke { name: String },
}

pub(super) async fn run(data_dir: &Path, command: TokensCommand) -> anyhow::Result<()> {
    let env = SettingsStore::load(data_dir)?;
    let config = FileConfig::load(data_dir)?;
    let db = app::open_db(data_dir, &env, &config).await?;
    match command {
        TokensCommand::Create {
            name,
            role,
            expires,
        } => {
            let role = Role::parse(&role, "role")?;
            let new = NewToken::new(&name, role, expires.as_deref(), "owner (command line)")?;
            let (token, secret) = db.blocking(|conn| tokens::create(conn, &new))?;
            let until = token.expires_at.as_deref().unwrap_or("revoked");
            outln!(
                "created token {:?} ({}), valid until {until}:",
                token.name,
                token.role
            )?;
            outln!("{secret}")
        }
        TokensCommand::List { json } => {
            let tokens = db.blocking(|conn| tokens::list(conn))?;
            if json {
                return outln!("{}", serde_json::to_string_pretty(&tokens)?);
            }
            if tokens.is_empty() {
                return outln!("no tokens; create one with `service-runtime tokens create`");
            }
            outln!(
                "{:<24} {:<9} {:<9} {:<25} {:<25} LAST USED",
                "NAME",
                "ROLE",
                "STARTS",
                "CREATED",
                "EXPIRES"
            )?;
            for t in &tokens {
                outln!(
                    "{:<24} {:<9} {:<9} {:<25} {:<25} {}",
                    t.name,
                    t.role,
                    t.hint,
                    t.created_at,
                    t.expires_at.as_deref().unwrap_or("-"),
                    t.last_used_at.as_deref().unwrap_or("never")
                )?;
            }
            Ok(())
        }
        TokensCommand::Revoke { name } => {
            db.blocking(|conn| tokens::revoke(conn, &name))?;
            outln!("revoked token {name:?}")
        }
    }
}
