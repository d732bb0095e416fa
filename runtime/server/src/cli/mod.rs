//! The `service-runtime` command line. It lives in the library, not in `src/main.rs`: the
//! binary then only links, instead of compiling every async function the commands reach a
//! second time (async bodies are instantiated in each crate that polls them).

// First: the macros it defines are used by the modules after it.
#[macro_use]
mod output;

mod adapters;
mod backup;
mod mcp;
mod run;
mod scaffold;
mod schedule;
mod through;
mod tokens;
mod users;

#[cfg(test)]
mod reference;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config;
use crate::server::{self, ServeOptions};
use crate::telemetry;
use clap::{Parser, Subcommand};

use adapters::AdaptersCommand;
use mcp::McpCommand;
use schedule::ScheduleCommand;
use tokens::TokensCommand;
use users::UsersCommand;

#[derive(Parser)]
#[command(
    version,
    about = "Local agent runtime whose inbound adapters are WebAssembly components"
)]
struct Cli {
    /// Where the database, config.toml, .env and adapters live
    /// [default: $XDG_DATA_HOME/service-runtime or ~/.local/share/service-runtime]
    #[arg(long, global = true, env = "SERVICE_DATA_DIR")]
    data_dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: dashboard and JSON API
    Serve {
        /// Address to listen on [default: 127.0.0.1, or [server] host in config.toml]
        #[arg(long, env = "SERVICE_HOST")]
        host: Option<String>,
        /// Port to listen on; 0 picks a free one [default: 8765, or [server] port in config.toml]
        #[arg(long, env = "SERVICE_PORT")]
        port: Option<u16>,
    },
    /// Run an agent once, streaming its answer; prints the trace id at the end
    Run {
        /// Agent profile to run [default: default]
        #[arg(long)]
        agent: Option<String>,
        /// Model to use instead of the profile's or the server's
        #[arg(long)]
        model: Option<String>,
        /// What to ask
        prompt: String,
    },
    /// Manage cron schedules (as the dashboard's Schedules tab does)
    Schedule {
        #[command(subcommand)]
        command: ScheduleCommand,
    },
    /// Manage WebAssembly adapters (a running server picks changes up)
    Adapters {
        #[command(subcommand)]
        command: AdaptersCommand,
    },
    /// Serve the agents over MCP on stdin and stdout (for desktop MCP clients), or import a
    /// client's MCP servers
    Mcp {
        #[command(subcommand)]
        command: Option<McpCommand>,
    },
    /// Manage API tokens (for scripts and other machines; sent as Authorization: Bearer)
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// Manage people with local accounts (sign-in with a password set through a one-time link)
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Write the data directory to one archive while the server runs: a consistent snapshot
    /// of the database, config.toml and the adapters, skills and uploads folders
    Backup {
        /// The archive to write (a gzipped tar)
        file: PathBuf,
        /// Include the secrets (.env); the archive is then as sensitive as they are
        #[arg(long)]
        with_secrets: bool,
    },
    /// Restore an archive written by `backup` into an empty data directory
    Restore {
        /// The archive to read
        file: PathBuf,
        /// Replace the database and files of a data directory that is not empty
        #[arg(long)]
        force: bool,
    },
    /// Runs an MCP server's program for the runtime (internal)
    #[command(hide = true)]
    McpGuard {
        #[arg(long)]
        parent: u32,
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
}

/// The whole command line: parses the arguments, runs the command, and says how it ended.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        Command::McpGuard { parent, command } => {
            return crate::mcp::process::guard(parent, &command);
        }
        command => command,
    };
    // The server logs its work; one-shot commands only speak up about problems.
    let level = match command {
        Command::Serve { .. } => "info",
        _ => "warn",
    };
    let outcome = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| {
            let telemetry = runtime.block_on(async { telemetry::init(level) })?;
            let outcome = run(&runtime, cli.data_dir, command);
            runtime.block_on(telemetry.shutdown());
            // A component's optimizing compile may still be at work (seconds for a big one):
            // the process does not wait for it, the next start compiles again.
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            outcome
        });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if output::is_closed(&e) => output::end_quietly(),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    runtime: &tokio::runtime::Runtime,
    data_dir: Option<PathBuf>,
    command: Command,
) -> anyhow::Result<()> {
    let data_dir = match data_dir {
        Some(dir) => dir,
        None => config::default_data_dir()?,
    };
    match command {
        Command::Serve { host, port } => runtime.block_on(server::serve(ServeOptions {
            data_dir,
            host,
            port,
        })),
        Command::Run {
            agent,
            model,
            prompt,
        } => runtime.block_on(run::run(&data_dir, agent, model, prompt)),
        Command::Schedule { command } => runtime.block_on(schedule::run(&data_dir, command)),
        Command::Adapters { command } => runtime.block_on(adapters::run(&data_dir, command)),
        Command::Mcp { command } => runtime.block_on(mcp::run(&data_dir, command)),
        Command::Tokens { command } => runtime.block_on(tokens::run(&data_dir, command)),
        Command::Users { command } => runtime.block_on(users::run(&data_dir, command)),
        Command::Backup { file, with_secrets } => backup::write(&data_dir, &file, with_secrets),
        Command::Restore { file, force } => backup::restore(&data_dir, &file, force),
        Command::McpGuard { .. } => unreachable!("the guard runs before the runtime starts"),
    }
}
