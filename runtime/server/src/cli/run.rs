//! `service-runtime run`: one agent run from the terminal, through the same engine as the
//! server (its trace shows up in the dashboard).

use std::io::Write;
use std::path::Path;

use service_runtime::agents::profiles::DEFAULT_PROFILE;
use service_runtime::app::{App, Role};
use service_runtime::engine::{Event, ProfileChoice, RunRequest};
use service_runtime::replica;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Streams the answer to stdout and tool activity to stderr; the last stdout line is
/// `trace_id: <id>`. Ctrl-C cancels the run (its trace records that).
pub async fn run(
    data_dir: &Path,
    agent: Option<String>,
    model: Option<String>,
    prompt: String,
) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    // The run's trace names this process, which says it is alive while it runs.
    let _presence =
        replica::keep_presence(app.db.clone(), app.replica.clone(), app.shutdown.clone()).await?;
    // Tools of MCP servers are there once each server answered (or failed to).
    app.mcp.start();
    app.mcp.settled().await;
    let profile = ProfileChoice::Required(agent.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()));
    let request = RunRequest {
        model,
        ..RunRequest::new(prompt, profile, "cli")
    };
    let (events, mut receiver) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let engine = app.engine.clone();
    let run_cancel = cancel.clone();
    let run = tokio::spawn(async move { engine.run(request, Some(&events), &run_cancel).await });

    let mut stdout = std::io::stdout().lock();
    loop {
        tokio::select! {
            event = receiver.recv() => match event {
                Some(Event::Started { .. }) => {}
                Some(Event::Token { text }) => {
                    stdout.write_all(text.as_bytes())?;
                    stdout.flush()?;
                }
                Some(Event::ToolCall { name, input, .. }) => eprintln!("\n[tool] {name} {input}"),
                Some(Event::ToolResult { name, error: Some(error), .. }) => eprintln!("[tool] {name} failed: {error}"),
                Some(Event::ToolResult { name, .. }) => eprintln!("[tool] {name} done"),
                None => break,
            },
            _ = tokio::signal::ctrl_c() => cancel.cancel(),
        }
    }
    let outcome = run.await?;
    app.mcp.stop().await;
    match outcome {
        Ok(output) => {
            writeln!(stdout, "\ntrace_id: {}", output.trace_id)?;
            Ok(())
        }
        Err(e) => match e.trace_id() {
            Some(trace_id) => anyhow::bail!("{e} (trace {trace_id})"),
            None => anyhow::bail!("{e}"),
        },
    }
}
