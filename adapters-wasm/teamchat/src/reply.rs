//! The work behind an event: run the agent and post its whole reply with `chat.postMessage`
//! into the same channel (and thread). A post that fails is logged and noted on the run's
//! trace, never retried.

use serde_json::{Value, json};

use crate::service::adapter::agent::{self, RunError, RunReply, RunRequest};
use crate::service::adapter::log::{self, Level};
use crate::service::adapter::{outbound_http, registry, secrets};
use crate::{AGENT_PROFILE, API_BASE, BOT_TOKEN};

const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// A queued reply.
pub struct Job {
    pub channel: String,
    /// Set when the mention was inside a thread: the reply goes there.
    pub thread_ts: Option<String>,
    pub prompt: String,
}

impl Job {
    pub fn to_bytes(&self) -> Vec<u8> {
        json!({ "channel": self.channel, "thread_ts": self.thread_ts, "prompt": self.prompt })
            .to_string()
            .into_bytes()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("bad job payload: {e}"))?;
        let field = |name: &str| value[name].as_str().map(str::to_owned);
        Ok(Self {
            channel: field("channel").ok_or("job payload without channel")?,
            thread_ts: field("thread_ts"),
            prompt: field("prompt").ok_or("job payload without prompt")?,
        })
    }
}

/// Runs the profile `SERVICE_TEAMCHAT_AGENT_PROFILE` (default `default`); a missing profile
/// runs with the server's defaults.
pub fn run_agent(prompt: &str) -> Result<RunReply, RunError> {
    let result = agent::run(&RunRequest {
        prompt: prompt.to_owned(),
        profile: secrets::get(AGENT_PROFILE).filter(|p| !p.trim().is_empty()),
        profile_required: false,
        history: Vec::new(),
    });
    registry::touch();
    result
}

pub fn run(payload: &[u8]) -> Result<(), String> {
    let job = Job::from_bytes(payload)?;
    let (text, trace_id, outcome) = match run_agent(&job.prompt) {
        Ok(reply) => (reply.text, Some(reply.trace_id), Ok(())),
        Err(e) => (
            "Sorry, I could not answer that: the agent run failed.".to_owned(),
            e.trace_id,
            Err(format!("agent run failed: {}", e.message)),
        ),
    };
    if let Err(problem) = post(&job, &text) {
        let note = format!("reply not delivered: {problem}");
        log::log(Level::Warn, &note);
        if let Some(trace_id) = &trace_id {
            // Best effort: the trace is where the operator looks for what happened.
            let _ = agent::annotate(trace_id, &note);
        }
    }
    outcome
}

/// `chat.postMessage`; the platform answers 200 with `"ok": false` for most failures.
fn post(job: &Job, text: &str) -> Result<(), String> {
    let base = secrets::get(API_BASE).unwrap_or_else(|| DEFAULT_API_BASE.to_owned());
    let mut message = json!({ "channel": job.channel, "text": text });
    if let Some(thread_ts) = &job.thread_ts {
        message["thread_ts"] = json!(thread_ts);
    }
    let response = outbound_http::send(&outbound_http::Request {
        method: "POST".into(),
        url: format!("{}/chat.postMessage", base.trim_end_matches('/')),
        headers: vec![
            (
                "content-type".into(),
                "application/json; charset=utf-8".into(),
            ),
            // The host puts the token in after its checks; it never enters the sandbox.
            (
                "authorization".into(),
                format!("Bearer {{{{secret:{BOT_TOKEN}}}}}"),
            ),
        ],
        body: message.to_string().into_bytes(),
        timeout_ms: None,
    })
    .map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    if response.status == 200 && answer["ok"] == true {
        return Ok(());
    }
    Err(format!(
        "chat.postMessage answered {}: {}",
        response.status,
        answer["error"].as_str().unwrap_or("no error given")
    ))
}
