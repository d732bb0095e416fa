//! Whether a command runs through the server running for its data directory (its provider,
//! agents and tools, components' included) or in this process; it says which on stderr.

use std::path::Path;

use crate::running_server::{self, Running};
use crate::settings_store::SettingsStore;

/// The running server, or `None` to run in this process.
pub(super) async fn server(data_dir: &Path) -> anyhow::Result<Option<Running>> {
    let env = SettingsStore::load(data_dir)?;
    let running = running_server::find(data_dir, &env).await;
    match &running {
        Some(running) => eprintln!("[through the server at {}]", running.url),
        None => eprintln!(
            "[no server runs for {}: running in this process]",
            data_dir.display()
        ),
    }
    Ok(running)
}

/// An answer that is not a success, as the error a command exits with (the API's message).
pub(super) async fn refused(response: reqwest::Response) -> anyhow::Error {
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    match body["error"].as_str() {
        Some(message) => anyhow::anyhow!("{message}"),
        None => anyhow::anyhow!("the server answered {status}"),
    }
}
