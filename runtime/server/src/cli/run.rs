//! `service-runtime run`: one agent run from the terminal, through the same engine as the
//! server (its trace shows up in the dashboard).

use std::io::Write;
use std::path::Path;

use crate::access::Principal;
use crate::agents::profiles::DEFAULT_PROFILE;
use crate::app::{App, Role};
use crate::engine::{Event, ProfileChoice, RunRequest};
use crate::replica;
use crate::running_server::Running;

use super::{output, through};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Streams the answer to stdout and tool activity to stderr; the last stdout line is
/// `trace_id: <id>`. Ctrl-C cancels the run (its trace records that). Through the server
/// running for `data_dir` when there is one, in this process otherwise.
pub(super) async fn run(
    data_dir: &Path,
    agent: Option<String>,
    model: Option<String>,
    prompt: String,
) -> anyhow::Result<()> {
    if let Some(server) = through::server(data_dir).await? {
        return remote(&server, agent, model, prompt).await;
    }
    let app = App::open(data_dir, Role::Command).await?;
    // The run's trace names this process, which says it is alive while it runs.
    let _presence = replica::keep_command_presence(&app).await?;
    // Tools of MCP servers and remote agents are there once each answered (or failed to).
    app.mcp.start();
    app.a2a.start();
    tokio::join!(app.mcp.settled(), app.a2a.settled());
    let profile = ProfileChoice::Required(agent.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()));
    let request = RunRequest {
        model,
        // Whoever may run the CLI on the data directory is the machine's owner.
        started_by: Some(Principal::owner().label()),
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
                Some(event) => show(&mut stdout, &event).map_err(output::failed)?,
                None => break,
            },
            _ = tokio::signal::ctrl_c() => cancel.cancel(),
        }
    }
    let outcome = run.await?;
    tokio::join!(app.mcp.stop(), app.a2a.stop());
    match outcome {
        Ok(output) => writeln!(stdout, "\ntrace_id: {}", output.trace_id).map_err(output::failed),
        Err(e) => match e.trace_id() {
            Some(trace_id) => anyhow::bail!("{e} (trace {trace_id})"),
            None => anyhow::bail!("{e}"),
        },
    }
}

/// Prints one event of a run: tokens on stdout, tool activity on stderr.
fn show(stdout: &mut impl Write, event: &Event) -> std::io::Result<()> {
    match event {
        Event::Started { .. } => {}
        Event::Token { text } => {
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
        Event::ToolCall { name, input, .. } => eprintln!("\n[tool] {name} {input}"),
        Event::ToolResult {
            name,
            error: Some(error),
            ..
        } => eprintln!("[tool] {name} failed: {error}"),
        Event::ToolResult { name, .. } => eprintln!("[tool] {name} done"),
    }
    Ok(())
}

/// The run on the server, streamed (`POST /api/chat/stream`); Ctrl-C closes the stream, which
/// cancels it there.
async fn remote(
    server: &Running,
    agent: Option<String>,
    model: Option<String>,
    prompt: String,
) -> anyhow::Result<()> {
    let response = server
        .client()
        .post(format!("{}/api/chat/stream", server.url))
        .json(&json!({ "prompt": prompt, "agent": agent, "model": model }))
        .send()
        .await?;
    if !response.status().is_success() {
        return Err(through::refused(response).await);
    }
    let mut frames = response.bytes_stream().eventsource();
    let mut stdout = std::io::stdout().lock();
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted: the run was cancelled"),
        };
        let Some(frame) = frame else {
            anyhow::bail!("the server closed the stream before the run ended");
        };
        let frame: Value = serde_json::from_str(&frame?.data)?;
        let trace = frame["trace_id"].as_str().unwrap_or("-");
        match frame["type"].as_str() {
            Some("done") => {
                return writeln!(stdout, "\ntrace_id: {trace}").map_err(output::failed);
            }
            Some("error") => {
                let message = frame["message"].as_str().unwrap_or("the run failed");
                anyhow::bail!("{message} (trace {trace})")
            }
            Some("approval_required") => anyhow::bail!(
                "the run waits for a person to approve {} (approval {}); decide it in the \
                 dashboard (trace {trace})",
                frame["tool"].as_str().unwrap_or("a tool"),
                frame["approval_id"].as_str().unwrap_or("-")
            ),
            _ => show(&mut stdout, &serde_json::from_value(frame)?).map_err(output::failed)?,
        }
    }
}
