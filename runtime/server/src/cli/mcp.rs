//! `service-runtime mcp`: the agents served over MCP on stdin and stdout, for desktop clients
//! that start their servers as commands (the same tools as `/mcp`); `mcp import FILE` reads
//! such a client's server list into `config.toml`.

use std::path::Path;

use crate::app::{App, Role};
use crate::config::FileConfig;
use crate::mcp::import;
use crate::replica;
use crate::settings_store::SettingsStore;
use crate::wasm::shared::write_atomically;
use anyhow::{Context, bail};
use clap::Subcommand;

#[derive(Subcommand)]
pub(super) enum McpCommand {
    /// Add the MCP servers of a client's JSON (`mcpServers`, as desktop and editor clients
    /// keep them) to config.toml; credentials go to .env, never to config.toml
    Import {
        /// The JSON file
        file: std::path::PathBuf,
    },
}

pub(super) async fn run(data_dir: &Path, command: Option<McpCommand>) -> anyhow::Result<()> {
    match command {
        None => serve(data_dir).await,
        Some(McpCommand::Import { file }) => import_file(data_dir, &file),
    }
}

async fn serve(data_dir: &Path) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    // Runs' traces name this process, which says it is alive while it serves.
    let _presence = replica::keep_command_presence(&app).await?;
    app.mcp.start();
    app.a2a.start();
    let ended = app.mcp_agents.clone().serve_stdio().await;
    app.shutdown.cancel();
    tokio::join!(app.mcp.stop(), app.a2a.stop());
    ended
}

/// Everything is checked before anything is written: the entries with the config they join, and
/// each credential against what `.env` already holds. Credentials are written first, so the
/// config never names a variable that is not set.
fn import_file(data_dir: &Path, file: &Path) -> anyhow::Result<()> {
    let json =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let imported = import::convert(&json)?;
    let config_path = data_dir.join("config.toml");
    let existing = match std::fs::read_to_string(&config_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", config_path.display()));
        }
    };
    let before = FileConfig::parse(&existing)
        .with_context(|| format!("invalid {}", config_path.display()))?;
    if let Some(taken) = imported
        .servers
        .iter()
        .find(|name| before.mcp.servers.contains_key(*name))
    {
        bail!("config.toml already has an MCP server named {taken:?}; nothing was imported");
    }
    let mut combined = existing.trim_end().to_owned();
    combined.push('\n');
    combined.push_str(&imported.toml);
    FileConfig::parse(&combined).context("the imported servers would not be a valid config")?;

    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let env = SettingsStore::load(data_dir)?;
    for (name, value) in &imported.secrets {
        if value.contains(['\n', '\r', '\0']) {
            bail!("the value for {name} is not a single line; nothing was imported");
        }
        if env.get(name).is_some_and(|current| current != *value) {
            bail!(
                "{name} is already set to another value; set it yourself and import again \
                 without it; nothing was imported"
            );
        }
    }
    for (name, value) in &imported.secrets {
        env.write_dotenv(name, value)?;
    }
    write_atomically(&config_path, combined.as_bytes())?;
    outln!(
        "imported {} MCP server(s) into {}: {}",
        imported.servers.len(),
        config_path.display(),
        imported.servers.join(", ")
    )?;
    if !imported.secrets.is_empty() {
        let names: Vec<&str> = imported.secrets.iter().map(|(n, _)| n.as_str()).collect();
        outln!(
            "credentials stored in .env (mode 0600), named by placeholders: {}",
            names.join(", ")
        )?;
    }
    outln!("restart the server to offer their tools")
}
