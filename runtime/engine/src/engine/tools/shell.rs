//! `shell_exec`: runs one program with arguments (no shell) in `<data_dir>/shell`. Off unless
//! `SERVICE_SHELL_ENABLED=true` and the profile names the tool; every call is logged.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use service_contract::tools::{RegistryError, Tool, ToolContext, ToolRegistry, args};

use crate::settings_store::SettingsStore;

pub(crate) const GATE: &str = "SERVICE_SHELL_ENABLED";
const DEFAULT_TIMEOUT: u64 = 10;
const MAX_TIMEOUT: u64 = 60;
const MAX_OUTPUT: usize = 64 * 1024;

#[derive(Deserialize)]
struct Exec {
    argv: Vec<String>,
    timeout_secs: Option<u64>,
}

/// Reads at most `MAX_OUTPUT` bytes, then drains the rest so the child never blocks on a pipe.
async fn read_capped(mut pipe: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut total = 0usize;
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = MAX_OUTPUT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if total > MAX_OUTPUT {
        text.push_str(&format!(
            "\n[output truncated: {total} bytes, kept {MAX_OUTPUT}]"
        ));
    }
    text
}

async fn exec(
    exec: Exec,
    env: &SettingsStore,
    dir: PathBuf,
    ctx: ToolContext,
) -> Result<String, String> {
    if env.get(GATE).as_deref() != Some("true") {
        return Err(format!(
            "shell_exec is disabled; set {GATE}=true to allow it"
        ));
    }
    let Some((program, rest)) = exec.argv.split_first() else {
        return Err("argv must name a program".into());
    };
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(
        exec.timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT),
    );
    let trace_id = ctx.run.as_ref().map(|run| run.trace_id.as_str());
    tracing::info!(trace_id = ?trace_id, argv = ?exec.argv, "shell_exec");
    let mut child = Command::new(program)
        .args(rest)
        .current_dir(&dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let stdout = tokio::spawn(read_capped(child.stdout.take().expect("piped")));
    let stderr = tokio::spawn(read_capped(child.stderr.take().expect("piped")));
    let status = tokio::select! {
        status = child.wait() => status.map_err(|e| e.to_string())?,
        () = tokio::time::sleep(timeout) => {
            let _ = child.kill().await;
            return Err(format!("{program:?} did not finish within {}s and was killed", timeout.as_secs()));
        }
        () = ctx.cancel.cancelled() => {
            let _ = child.kill().await;
            return Err("cancelled".into());
        }
    };
    let (stdout, stderr) = (
        stdout.await.unwrap_or_default(),
        stderr.await.unwrap_or_default(),
    );
    Ok(json!({ "exit_code": status.code(), "stdout": stdout, "stderr": stderr }).to_string())
}

/// `dir` is `<data_dir>/shell`, the working directory of every command.
pub(super) fn register(
    registry: &ToolRegistry,
    env: Arc<SettingsStore>,
    dir: PathBuf,
) -> Result<(), RegistryError> {
    let mut tool = Tool::new(
        "shell_exec",
        "Runs one program with arguments (no shell: no pipes, globbing or variables) in a \
         scratch folder and returns its exit code and output.",
        json!({
            "type": "object",
            "properties": {
                "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments"},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT}
            },
            "required": ["argv"],
            "additionalProperties": false
        }),
        move |input, ctx: ToolContext| {
            let (env, dir) = (Arc::clone(&env), dir.clone());
            async move { exec(args(input)?, &env, dir, ctx).await }
        },
    );
    tool.gate = Some(GATE);
    registry.register(tool, false)
}
