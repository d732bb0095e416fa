//! `service-runtime mcp`: the agents served over MCP on stdin and stdout, for desktop clients
//! that start their servers as commands. The same tools as `/mcp`.

use std::path::Path;

use rmcp::ServiceExt;
use service_runtime::app::{App, Role};
use service_runtime::replica;

pub async fn serve(data_dir: &Path) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    // Runs' traces name this process, which says it is alive while it serves.
    let _presence =
        replica::keep_presence(app.db.clone(), app.replica.clone(), app.shutdown.clone()).await?;
    app.mcp.start();
    let session = app
        .mcp_agents
        .clone()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the MCP client did not start a session: {e}"))?;
    let ended = session.waiting().await;
    app.shutdown.cancel();
    app.mcp.stop().await;
    ended?;
    Ok(())
}
