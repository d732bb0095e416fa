//! The server's built-in tools. Each captures what it needs (the database, the data directory,
//! the environment) when it is registered.

mod delegate;
mod files;
mod github;
mod notes;
mod shell;
mod skills;
mod web_search;

use std::path::PathBuf;
use std::sync::Arc;

use service_contract::tools::{RegistryError, ToolRegistry};

use crate::config::WebSearchSection;
use crate::db::Db;
use crate::settings_store::SettingsStore;

/// What the built-in tools need.
pub struct BuiltinConfig {
    pub db: Db,
    pub env: Arc<SettingsStore>,
    pub data_dir: PathBuf,
    pub web_search: Option<WebSearchSection>,
}

/// Registers every built-in tool whose configuration is present.
pub fn register_builtin(
    registry: &ToolRegistry,
    config: BuiltinConfig,
) -> Result<(), RegistryError> {
    notes::register(registry, &config.db)?;
    delegate::register(registry)?;
    files::register(registry, config.data_dir.join("uploads"))?;
    skills::register(registry, config.data_dir.join("skills"))?;
    shell::register(
        registry,
        Arc::clone(&config.env),
        config.data_dir.join("shell"),
    )?;
    github::register(registry, Arc::clone(&config.env))?;
    if let Some(web_search) = config.web_search {
        web_search::register(registry, web_search, config.env)?;
    }
    Ok(())
}
