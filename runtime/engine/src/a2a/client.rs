//! Calling a remote agent: one message over its JSON-RPC binding (streamed when its card says
//! it streams), followed until its task settles, read into what the model gets back. All that
//! is read is bounded, and a task left behind (timed out, cancelled, cut) is cancelled there.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use service_contract::tools::MAX_RESULT_BYTES;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::telemetry::propagation;

/// One JSON-RPC response (a blocking answer, one streamed event) is at most this long.
pub(crate) const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// A whole stream is at most this long; one that goes on is cut there.
pub(crate) const MAX_STREAM_BYTES: usize = 8 << 20;
/// What is kept of an answer, leaving room for the line that says it was cut.
const KEPT_BYTES: usize = MAX_RESULT_BYTES - 256;
/// How long cancelling a task left behind may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call abandoned before its task's id came reads on for the id, to cancel the
/// task there.
const ID_WAIT: Duration = Duration::from_secs(10);
/// How soon a task that has not settled when its answer or stream ended is read again; each
/// wait doubles up to the last.
const FIRST_POLL: Duration = Duration::from_millis(250);
const LAST_POLL: Duration = Duration::from_secs(4);

/// What a tool call asks the agent.
pub(crate) struct Ask<'a> {
    pub(crate) skill: &'a str,
    pub(crate) message: &'a str,
    /// Goes on in an earlier conversation with it.
    pub(crate) context_id: Option<&'a str>,
    /// Answers its task that waits for input.
    pub(crate) task_id: Option<&'a str>,
}

/// A remote agent to call: where, how, and with which headers (filled, so never shown).
pub(crate) struct Agent {
    pub(crate) http: reqwest::Client,
    pub(crate) name: String,
    pub(crate) endpoint: reqwest::Url,
    pub(crate) headers: HeaderMap,
    pub(crate) streaming: bool,
}

impl Agent {
    /// Sends the message and follows its task until it settles, within `timeout`, abandoned
    /// (and its task cancelled there) when the run is cancelled or the call dropped. The
    /// answer, or why not.
    pub(crate) async fn ask(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let params = json!({"message": message(ask)});
        // The call goes on in a task of its own, so one abandoned before its task's id came
        // still learns it, and cancels the task there.
        let abandoned = CancellationToken::new();
        let _abandon_when_dropped = abandoned.clone().drop_guard();
        let (answered, answer) = oneshot::channel();
        let follow = Arc::clone(self).follow(params, timeout, abandoned, answered);
        // In the caller's span: its trace goes on to the agent.
        tokio::spawn(follow.instrument(tracing::Span::current()));
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| {
                Err(format!("the call to the agent {:?} ended without an answer", self.name))
            }),
            () = cancel.cancelled() => Err("the run was cancelled".to_owned()),
        }
    }

    /// [`Agent::ask`]'s call: the exchange, its `answer`, and the task cancelled there when
    /// the call leaves it running (timed out, cut, abandoned).
    async fn follow(
        self: Arc<Self>,
        params: Value,
        timeout: Duration,
        abandoned: CancellationToken,
        answer: oneshot::Sender<Result<String, String>>,
    ) {
        let mut answer = Some(answer);
        let mut progress = Progress::default();
        let stopping = CancellationToken::new();
        let outcome = {
            let exchange = async {
                if self.streaming {
                    self.stream(&params, &mut progress, &stopping).await?;
                } else {
                    progress.take(&self.call("SendMessage", &params).await?)?;
                }
                self.settle(&mut progress, &stopping).await
            };
            let mut exchange = pin!(exchange);
            let stopped = tokio::select! {
                outcome = &mut exchange => Ok(outcome),
                () = tokio::time::sleep(timeout) => Err(format!(
                    "the agent {:?} did not finish within {} s", self.name, timeout.as_secs()
                )),
                () = abandoned.cancelled() => Err("the call was abandoned".to_owned()),
            };
            match stopped {
                Ok(outcome) => outcome,
                Err(why) => {
                    // The caller is answered at once. Stopped before its task's id came, the
                    // exchange reads on until it does (a while at most), so the task is
                    // cancelled there; knowing it, it stops at once.
                    if let Some(answer) = answer.take() {
                        let _ = answer.send(Err(why.clone()));
                    }
                    stopping.cancel();
                    let _ = tokio::time::timeout(ID_WAIT, &mut exchange).await;
                    Err(why)
                }
            }
        };
        if progress.left_behind(&outcome) {
            self.cancel_task(progress.task_id.as_deref().unwrap_or_default())
                .await;
        }
        if let Some(answer) = answer {
            let _ = answer.send(outcome.and_then(|()| progress.answer(&self.name)));
        }
    }

    /// `SendStreamingMessage`, its events taken until the task settles or the stream ends.
    async fn stream(
        &self,
        params: &Value,
        progress: &mut Progress,
        stopping: &CancellationToken,
    ) -> Result<(), String> {
        let response = self
            .post("SendStreamingMessage", params, "text/event-stream")
            .await?;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !is_stream {
            // A refusal comes as one JSON-RPC response.
            return progress.take(&self.result(response).await?);
        }
        let mut read = 0;
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| e.to_string())?;
            read += chunk.len();
            if read > MAX_STREAM_BYTES {
                return Err(format!("its stream went past {MAX_STREAM_BYTES} bytes"));
            }
            Ok(chunk)
        });
        let mut events = bytes.eventsource();
        loop {
            // Told to stop, it does once it knows the task's id (before reading on).
            let event = tokio::select! {
                biased;
                () = stopping.cancelled(), if progress.task_id.is_some() => return Err(STOPPED.to_owned()),
                event = events.next() => event,
            };
            let Some(event) = event else {
                break;
            };
            let event = event.map_err(|e| format!("the agent {:?}: {e}", self.name))?;
            if event.data.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "the agent {:?} sent an event of more than {MAX_RESPONSE_BYTES} bytes",
                    self.name
                ));
            }
            let response: Value = serde_json::from_str(&event.data).map_err(|e| {
                format!(
                    "the agent {:?} sent an event that is not JSON: {e}",
                    self.name
                )
            })?;
            progress.take(&self.unwrap(response)?)?;
            if progress.settled() {
                break;
            }
        }
        Ok(())
    }

    /// Reads the task with `GetTask` until it settles: after an answer that came back at once,
    /// or a stream that ended early.
    async fn settle(
        &self,
        progress: &mut Progress,
        stopping: &CancellationToken,
    ) -> Result<(), String> {
        let mut wait = FIRST_POLL;
        while !progress.settled() {
            let id = progress.task_id.clone().ok_or_else(|| {
                format!(
                    "the agent {:?} ended its answer without a task or a message",
                    self.name
                )
            })?;
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stopping.cancelled() => return Err(STOPPED.to_owned()),
            }
            wait = (wait * 2).min(LAST_POLL);
            let task = self.call("GetTask", &json!({"id": id})).await?;
            progress.take(&json!({"task": task}))?;
        }
        Ok(())
    }

    /// Cancels a task this call leaves behind; a failure is logged, as the call already failed.
    async fn cancel_task(&self, id: &str) {
        let cancelled =
            tokio::time::timeout(CANCEL_TIMEOUT, self.call("CancelTask", &json!({"id": id}))).await;
        match cancelled {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(a2a_agent = %self.name, task = %id, "cannot cancel: {e}"),
            Err(_) => tracing::warn!(a2a_agent = %self.name, task = %id, "cancelling timed out"),
        }
    }

    /// One JSON-RPC call answered by one response: its result.
    async fn call(&self, method: &str, params: &Value) -> Result<Value, String> {
        let response = self.post(method, params, "application/json").await?;
        self.result(response).await
    }

    async fn post(
        &self,
        method: &str,
        params: &Value,
        accept: &'static str,
    ) -> Result<reqwest::Response, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut headers = self.headers.clone();
        headers.extend(propagation::headers());
        headers.insert("a2a-version", HeaderValue::from_static("1.0"));
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        let response = self
            .http
            .post(self.endpoint.clone())
            .headers(headers)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("cannot reach the agent {:?}: {e}", self.name))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the agent {:?} answered HTTP {status}", self.name));
        }
        Ok(response)
    }

    /// A response's body, at most [`MAX_RESPONSE_BYTES`], as a JSON-RPC response's result.
    async fn result(&self, response: reqwest::Response) -> Result<Value, String> {
        let body = bounded(response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                Unread::TooLong => format!(
                    "the agent {:?} answered more than {MAX_RESPONSE_BYTES} bytes",
                    self.name
                ),
                Unread::Failed(e) => format!("the agent {:?}: {e}", self.name),
            })?;
        let response: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("the agent {:?} answered something not JSON: {e}", self.name))?;
        self.unwrap(response)
    }

    /// A JSON-RPC response's result, or its error as the agent said it.
    fn unwrap(&self, mut response: Value) -> Result<Value, String> {
        if let Some(error) = response.get("error") {
            let message = error["message"].as_str().unwrap_or("no reason given");
            let code = &error["code"];
            return Err(format!(
                "the agent {:?} refused: {message} (code {code})",
                self.name
            ));
        }
        match response.get_mut("result").map(Value::take) {
            Some(result @ Value::Object(_)) => Ok(result),
            _ => Err(format!(
                "the agent {:?} answered without a result",
                self.name
            )),
        }
    }
}

/// Why a body was not read.
pub(crate) enum Unread {
    TooLong,
    Failed(reqwest::Error),
}

/// A response's body, refused once it is longer than `max` (said ahead or not).
pub(crate) async fn bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, Unread> {
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(Unread::TooLong);
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Unread::Failed)?;
        if body.len() + chunk.len() > max {
            return Err(Unread::TooLong);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What an exchange told to stop ends with (whoever told it says why).
const STOPPED: &str = "stopped";

/// The message of a call.
fn message(ask: &Ask<'_>) -> Value {
    let mut message = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": ask.message}],
        "metadata": {"skill": ask.skill},
    });
    if let Some(context) = ask.context_id {
        message["contextId"] = json!(context);
    }
    if let Some(task) = ask.task_id {
        message["taskId"] = json!(task);
    }
    message
}

/// What is known of the answer so far.
#[derive(Default)]
struct Progress {
    task_id: Option<String>,
    context_id: Option<String>,
    /// The task's state, as A2A names it.
    state: Option<String>,
    /// What its last status message said.
    said: String,
    /// Its artifacts' text, by artifact id, in the order they came.
    artifacts: Vec<(String, String)>,
    /// An answer given as a message instead of a task.
    reply: Option<String>,
    /// The answer went past what is kept: the rest is not read.
    cut: bool,
}

impl Progress {
    /// Takes in a result or an event: a task, a message, a status or artifact update.
    fn take(&mut self, event: &Value) -> Result<(), String> {
        if let Some(task) = event.get("task") {
            self.ids(task, "id");
            self.status(&task["status"]);
            self.artifacts.clear();
            for artifact in task["artifacts"].as_array().into_iter().flatten() {
                self.artifact(artifact, false);
            }
        } else if let Some(message) = event.get("message") {
            self.ids(message, "taskId");
            self.reply = Some(text_of(&message["parts"]));
        } else if let Some(update) = event.get("statusUpdate") {
            self.ids(update, "taskId");
            self.status(&update["status"]);
        } else if let Some(update) = event.get("artifactUpdate") {
            self.ids(update, "taskId");
            self.artifact(&update["artifact"], update["append"] == true);
        } else {
            return Err("an answer that is neither a task, a message nor an update".to_owned());
        }
        Ok(())
    }

    fn ids(&mut self, object: &Value, task: &str) {
        let text = |name: &str| object[name].as_str().filter(|id| !id.is_empty());
        if let Some(id) = text(task) {
            self.task_id = Some(id.to_owned());
        }
        if let Some(id) = text("contextId") {
            self.context_id = Some(id.to_owned());
        }
    }

    fn status(&mut self, status: &Value) {
        if let Some(state) = status["state"].as_str() {
            self.state = Some(state.to_owned());
        }
        if status["message"].is_object() {
            self.said = text_of(&status["message"]["parts"]);
        }
    }

    fn artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact["artifactId"].as_str().unwrap_or_default();
        let text = text_of(&artifact["parts"]);
        match self.artifacts.iter_mut().find(|(known, _)| known == id) {
            Some((_, kept)) if append => kept.push_str(&text),
            Some((_, kept)) => *kept = text,
            None => self.artifacts.push((id.to_owned(), text)),
        }
        let total: usize = self.artifacts.iter().map(|(_, text)| text.len()).sum();
        if total > KEPT_BYTES {
            self.cut = true;
            let over = total - KEPT_BYTES;
            if let Some((_, last)) = self.artifacts.last_mut() {
                let mut keep = last.len().saturating_sub(over);
                while !last.is_char_boundary(keep) {
                    keep -= 1;
                }
                last.truncate(keep);
            }
        }
    }

    /// Whether nothing more is to come: an answer, a state that ends the task or waits for
    /// the caller, or an answer cut.
    fn settled(&self) -> bool {
        self.reply.is_some()
            || self.cut
            || self.state.as_deref().is_some_and(|state| {
                matches!(
                    state,
                    "TASK_STATE_COMPLETED"
                        | "TASK_STATE_FAILED"
                        | "TASK_STATE_CANCELED"
                        | "TASK_STATE_REJECTED"
                        | "TASK_STATE_INPUT_REQUIRED"
                        | "TASK_STATE_AUTH_REQUIRED"
                )
            })
    }

    /// Whether there is a task there that has not ended.
    fn unfinished(&self) -> bool {
        self.task_id.is_some()
            && self.reply.is_none()
            && !matches!(
                self.state.as_deref(),
                Some(
                    "TASK_STATE_COMPLETED"
                        | "TASK_STATE_FAILED"
                        | "TASK_STATE_CANCELED"
                        | "TASK_STATE_REJECTED"
                )
            )
    }

    /// Whether the call leaves a task running there: one it stopped following.
    fn left_behind(&self, outcome: &Result<(), String>) -> bool {
        self.unfinished() && (outcome.is_err() || self.cut)
    }

    /// What the model gets: the answer (with the context to go on in), what the agent waits
    /// for, or why the task failed.
    fn answer(self, agent: &str) -> Result<String, String> {
        let context = self
            .context_id
            .as_deref()
            .map(|id| format!("\n[context_id {id}: pass it to go on in this conversation]"))
            .unwrap_or_default();
        if let Some(reply) = self.reply {
            return Ok(format!("{reply}{context}"));
        }
        let state = self.state.as_deref().unwrap_or_default();
        let said = if self.said.is_empty() {
            "no reason given"
        } else {
            &self.said
        };
        let answer = || {
            let texts: Vec<&str> = self
                .artifacts
                .iter()
                .map(|(_, text)| text.as_str())
                .collect();
            let text = texts.join("\n");
            if text.is_empty() {
                self.said.clone()
            } else {
                text
            }
        };
        match state {
            _ if self.cut => Ok(format!(
                "{}\n[cut: the agent {agent:?} answered more than {KEPT_BYTES} bytes; the rest \
                 was not read and its task was cancelled]",
                answer()
            )),
            "TASK_STATE_COMPLETED" => Ok(format!("{}{context}", answer())),
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => Ok(format!(
                "The agent {agent:?} needs more before it goes on: {said}\n[to answer it, call \
                 this tool again with task_id {} and context_id {}]",
                self.task_id.as_deref().unwrap_or_default(),
                self.context_id.as_deref().unwrap_or_default()
            )),
            "TASK_STATE_REJECTED" => Err(format!("the agent {agent:?} refused the task: {said}")),
            "TASK_STATE_CANCELED" => Err(format!("the agent {agent:?} cancelled the task: {said}")),
            _ => Err(format!("the agent {agent:?} failed: {said}")),
        }
    }
}

/// Parts as text: text parts run together (a streamed answer's chunks are parts of one
/// artifact), data parts as JSON and files named, each on a line of its own.
fn text_of(parts: &Value) -> String {
    let mut text = String::new();
    for part in parts.as_array().into_iter().flatten() {
        if let Some(chunk) = part["text"].as_str() {
            text.push_str(chunk);
            continue;
        }
        let line = if let Some(data) = part.get("data") {
            data.to_string()
        } else if let Some(url) = part["url"].as_str() {
            format!("[file {url}]")
        } else {
            let name = part["filename"].as_str().or(part["mediaType"].as_str());
            format!("[file {}]", name.unwrap_or("without a name"))
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.truncate(text.trim_end_matches('\n').len());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(events: &[Value]) -> Progress {
        let mut progress = Progress::default();
        for event in events {
            progress.take(event).unwrap();
        }
        progress
    }

    #[test]
    fn streamed_chunks_make_the_answer_and_a_terminal_state_settles_it() {
        let progress = progress(&[
            json!({"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            json!({"artifactUpdate": {"taskId": "t1", "artifact": {"artifactId": "a", "parts": [{"text": "one "}]}}}),
            json!({"artifactUpdate": {"taskId": "t1", "append": true, "artifact": {"artifactId": "a", "parts": [{"text": "two"}]}}}),
            json!({"artifactUpdate": {"taskId": "t1", "artifact": {"artifactId": "b", "parts": [{"data": {"n": 1}}]}}}),
        ]);
        assert!(!progress.settled());
        let mut progress = progress;
        progress
            .take(&json!({"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_COMPLETED"}}}))
            .unwrap();
        assert!(progress.settled());
        assert_eq!(
            progress.answer("helper").unwrap(),
            "one two\n{\"n\":1}\n[context_id c1: pass it to go on in this conversation]"
        );
    }

    #[test]
    fn waiting_failing_and_overlong_answers_say_so() {
        let waiting = progress(&[json!({"task": {"id": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"parts": [{"text": "Which colour?"}]},
        }}})]);
        let answer = waiting.answer("helper").unwrap();
        assert!(
            answer.contains("needs more before it goes on: Which colour?"),
            "{answer}"
        );
        assert!(answer.contains("task_id t and context_id c"), "{answer}");
        let failed = progress(&[json!({"statusUpdate": {"taskId": "t", "status": {
            "state": "TASK_STATE_FAILED", "message": {"parts": [{"text": "no disk"}]}}}})]);
        assert!(!failed.left_behind(&Err(String::new())));
        assert_eq!(
            failed.answer("helper").unwrap_err(),
            "the agent \"helper\" failed: no disk"
        );

        let big = "é".repeat(KEPT_BYTES);
        let cut = progress(&[
            json!({"task": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}}),
            json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": big}]}}}),
        ]);
        assert!(cut.settled() && cut.left_behind(&Ok(())));
        let answer = cut.answer("helper").unwrap();
        assert!(answer.len() <= MAX_RESULT_BYTES && answer.ends_with("its task was cancelled]"));
    }

    #[test]
    fn a_message_is_an_answer_and_anything_else_is_refused() {
        let reply = progress(&[json!({"message": {"contextId": "c", "parts": [{"text": "hi"}]}})]);
        assert!(reply.settled());
        assert!(reply.answer("x").unwrap().starts_with("hi\n[context_id c"));
        assert!(Progress::default().take(&json!({"other": 1})).is_err());
    }
}
