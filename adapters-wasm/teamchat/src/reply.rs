//! The work behind an event or a deferred command. A job runs at least once; its effects
//! happen once: the answer is kept in kv as soon as the agent gives it (a later attempt posts
//! it without asking the model again), and so is how many of its messages were posted (a later
//! attempt goes on from there, and one after the last posts nothing). A post the platform
//! refuses for now (429 with `Retry-After`, a 5xx, no answer) asks the host for another
//! attempt; a final refusal is logged and noted on the run's trace.
//!
//! A crash between the platform accepting a message and its count being stored would repeat
//! that message at the next attempt; so every message of a reply carries the job and its part
//! as message metadata, and an attempt after the first looks in the conversation for the parts
//! already there before it posts. (A reply through a slash command's `response_url` has no
//! conversation to look in: there the window stays, a few milliseconds. So does a reply whose
//! conversation cannot be read, a missing scope say: it is posted again.)

use serde_json::{Value, json};

use crate::exports::service::adapter::handler::{Job, JobFailure};
use crate::job::{CommandJob, EventJob, Work};
use crate::platform::{self, Failure};
use crate::service::adapter::agent::{self, FailureKind, RunOutcome, RunRequest, Turn};
use crate::service::adapter::kv;
use crate::service::adapter::log::{self, Level};
use crate::service::adapter::{registry, secrets};
use crate::split::{MESSAGE_CHARS, split};
use crate::{AGENT_PROFILE, approval, context, pace};

/// How long a job's answer and progress are remembered: longer than any job keeps retrying.
const MEMORY_TTL_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// The platform takes this many messages through one `response_url`.
const RESPONSE_URL_MESSAGES: usize = 5;
/// Attempts that wait for a free agent slot before the user is told the agent is busy; the
/// host's default `[jobs] attempts`.
const LIMITED_ATTEMPTS: u32 = 3;
const LIMITED_WAIT_MS: u64 = 15_000;
/// A refused post with no `Retry-After` waits 2 s, then 4 s, 8 s, ... up to 5 minutes.
const FIRST_BACKOFF_MS: u64 = 2_000;
const MAX_BACKOFF_MS: u64 = 5 * 60 * 1000;

const SORRY: &str = "Sorry, I could not answer that: the agent run failed.";
const TOO_LONG: &str = "(The answer goes on, but a slash command's reply is limited to 5 \
                        messages: mention me with the question to get all of it.)";

/// The request for the profile `SERVICE_TEAMCHAT_AGENT_PROFILE` (default `default`; a missing
/// profile runs with the server's defaults).
pub fn request(prompt: &str, history: Vec<Turn>) -> RunRequest {
    RunRequest {
        prompt: prompt.to_owned(),
        profile: secrets::get(AGENT_PROFILE).filter(|p| !p.trim().is_empty()),
        profile_required: false,
        history,
    }
}

/// What to post, and the run it came from.
struct Answer {
    text: String,
    trace_id: Option<String>,
    /// Set when the text is an apology for a failed run: the job fails once it is posted.
    failed: Option<String>,
    /// Set when the text asks a person to approve a tool call: this approval's id, which its
    /// buttons carry.
    approval: Option<String>,
}

/// How far a job got, kept in kv under its task id as one value (one read, one write a
/// step): its answer and how many of its messages were posted, or `"all"` once every one was
/// (the answer then forgotten).
struct Progress {
    key: String,
}

/// The count's value once every message is posted.
const ALL_SENT: &str = "all";

/// The metadata event type that marks a message as part of a reply.
const REPLY_EVENT: &str = "service_reply";

impl Progress {
    fn of(job_id: &str) -> Self {
        Self {
            key: format!("reply:{job_id}"),
        }
    }

    /// Messages already posted and the answer they come from, if it was kept; `None` once
    /// every message was posted.
    fn load(&self) -> Result<Option<(usize, Option<Answer>)>, Failure> {
        let Some(bytes) = kv::get(&self.key).map_err(unreadable)? else {
            return Ok(Some((0, None)));
        };
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if value["sent"] == ALL_SENT {
            return Ok(None);
        }
        let sent = value["sent"].as_u64().map_or(0, |n| n as usize);
        let field = |name: &str| value["answer"][name].as_str().map(str::to_owned);
        let answer = field("text").map(|text| Answer {
            text,
            trace_id: field("trace_id"),
            failed: field("failed"),
            approval: field("approval"),
        });
        Ok(Some((sent, answer)))
    }

    /// The answer, with `sent` of its messages posted.
    fn keep(&self, answer: &Answer, sent: usize) {
        let value = json!({
            "sent": sent,
            "answer": {
                "text": answer.text, "trace_id": answer.trace_id, "failed": answer.failed,
                "approval": answer.approval,
            },
        });
        self.write(
            &value,
            "cannot keep the answer; a retry asks the agent again",
        );
    }

    /// Every message is out (or never will be): later attempts post nothing.
    fn finish(&self) {
        self.write(
            &json!({ "sent": ALL_SENT }),
            "cannot record a posted message; a retry may post it again",
        );
    }

    fn write(&self, value: &Value, failed: &str) {
        let bytes = value.to_string();
        if let Err(e) = kv::set(&self.key, bytes.as_bytes(), Some(MEMORY_TTL_MS)) {
            log::log(Level::Warn, &format!("{failed}: {e}"));
        }
    }
}

fn unreadable(e: crate::service::adapter::types::Error) -> Failure {
    Failure::Later {
        after_ms: None,
        message: format!("cannot read the job's progress: {e}"),
    }
}

fn backoff_ms(attempt: u32) -> u64 {
    FIRST_BACKOFF_MS
        .saturating_mul(1 << attempt.saturating_sub(1).min(20))
        .min(MAX_BACKOFF_MS)
}

fn give_up(message: String) -> JobFailure {
    JobFailure {
        message,
        retry_after_ms: None,
    }
}

/// Runs a job: see the module's notes.
pub fn run(job: Job) -> Result<(), JobFailure> {
    let work = Work::from_bytes(&job.payload).map_err(give_up)?;
    let progress = Progress::of(&job.id);
    let later = |failure: Failure| match failure {
        Failure::Later { after_ms, message } => JobFailure {
            message,
            retry_after_ms: Some(after_ms.unwrap_or_else(|| backoff_ms(job.attempt))),
        },
        Failure::Final(message) => give_up(message),
    };
    let Some((mut posted, kept)) = progress.load().map_err(later)? else {
        return Ok(());
    };
    let answer = match kept {
        Some(answer) => answer,
        None => {
            let answer = answer(&work, job.attempt)?;
            progress.keep(&answer, posted);
            answer
        }
    };
    let messages = messages(&work, &answer);
    if let Work::Event(event) | Work::Resumed(event) = &work
        && job.attempt > 1
        && posted < messages.len()
    {
        posted = posted.max(already_posted(event, &job.id));
    }
    match deliver(&work, &messages, &answer, posted, &job.id, &progress) {
        Ok(()) => {
            progress.finish();
            answer.failed.map_or(Ok(()), |failed| Err(give_up(failed)))
        }
        Err(failure) => {
            let note = match &failure {
                Failure::Later { .. } => format!(
                    "reply not delivered yet (attempt {}): {}; trying again later",
                    job.attempt,
                    failure.message()
                ),
                Failure::Final(message) => {
                    progress.finish();
                    format!("reply not delivered: {message}")
                }
            };
            log::log(Level::Warn, &note);
            if let Some(trace_id) = &answer.trace_id {
                // Best effort: the trace is where the operator looks for what happened.
                let _ = agent::annotate(trace_id, &note);
            }
            Err(later(failure))
        }
    }
}

/// The agent's answer, or its question for a person; a run refused for the adapter's limits
/// asks for another attempt.
fn answer(work: &Work, attempt: u32) -> Result<Answer, JobFailure> {
    let result = match work {
        Work::Event(event) => {
            // Once a person decides, the rest of the answer comes back as a job like this.
            let then = Work::Resumed(event.clone()).to_bytes();
            let request = request(&event.prompt, context::turns(event));
            pace::run(&request, Some((&event.conversation(), &then)))
        }
        Work::Resumed(_) => agent::went_on()
            .ok_or_else(|| give_up("the host knows of no run that went on for this job".into()))?,
        Work::Command(CommandJob {
            answer: Some(text), ..
        }) => {
            return Ok(Answer {
                text: text.clone(),
                trace_id: None,
                failed: None,
                approval: None,
            });
        }
        Work::Command(command) => pace::run(&request(&command.prompt, Vec::new()), None),
    };
    registry::touch();
    match result {
        Ok(RunOutcome::Answered(reply)) => Ok(Answer {
            text: reply.text,
            trace_id: Some(reply.trace_id),
            failed: None,
            approval: None,
        }),
        Ok(RunOutcome::Waiting(waiting)) => {
            if let Work::Event(event) | Work::Resumed(event) = work {
                approval::remember_asker(&waiting.approval_id, event.user.as_deref());
            }
            Ok(Answer {
                text: approval::question(&waiting),
                trace_id: Some(waiting.trace_id),
                failed: None,
                approval: Some(waiting.approval_id),
            })
        }
        Err(e) if matches!(e.kind, FailureKind::Limited) && attempt < LIMITED_ATTEMPTS => {
            Err(JobFailure {
                message: e.message,
                retry_after_ms: Some(LIMITED_WAIT_MS),
            })
        }
        // Deleted by the operator: nobody is waiting for an apology.
        Err(e) if matches!(e.kind, FailureKind::Cancelled) => Err(give_up(e.message)),
        Err(e) => Ok(Answer {
            text: SORRY.to_owned(),
            trace_id: e.trace_id,
            failed: Some(format!("agent run failed: {}", e.message)),
            approval: None,
        }),
    }
}

/// The messages an answer is posted as (a question for a person is one, with its buttons).
fn messages(work: &Work, answer: &Answer) -> Vec<String> {
    if answer.approval.is_some() {
        return vec![answer.text.clone()];
    }
    let mut parts = split(&answer.text, MESSAGE_CHARS);
    if matches!(work, Work::Command(_)) && parts.len() > RESPONSE_URL_MESSAGES {
        parts.truncate(RESPONSE_URL_MESSAGES - 1);
        parts.push(TOO_LONG.to_owned());
    }
    parts
}

/// How many parts of job `job_id`'s reply the conversation shows: a part an earlier attempt
/// posted but could not count. 0 when the conversation cannot be read (the part is posted
/// again, as before this look).
fn already_posted(event: &EventJob, job_id: &str) -> usize {
    let found = match (&event.thread_ts, &event.ts) {
        (Some(thread), _) => platform::get(
            "conversations.replies",
            &[
                ("channel", event.channel.as_str()),
                ("ts", thread.as_str()),
                ("include_all_metadata", "true"),
                ("limit", "1000"),
            ],
        ),
        (None, Some(ts)) => platform::get(
            "conversations.history",
            &[
                ("channel", event.channel.as_str()),
                ("oldest", ts.as_str()),
                ("include_all_metadata", "true"),
                ("limit", "1000"),
            ],
        ),
        (None, None) => return 0,
    };
    let messages = match found {
        Ok(answer) => answer["messages"].as_array().cloned().unwrap_or_default(),
        Err(e) => {
            log::log(
                Level::Warn,
                &format!(
                    "cannot look for the parts an earlier attempt posted; posting from the last counted: {}",
                    e.message()
                ),
            );
            return 0;
        }
    };
    messages
        .iter()
        .filter(|m| {
            m["metadata"]["event_type"] == REPLY_EVENT
                && m["metadata"]["event_payload"]["job"] == job_id
        })
        .filter_map(|m| m["metadata"]["event_payload"]["part"].as_u64())
        .map(|part| part as usize + 1)
        .max()
        .unwrap_or(0)
}

/// Posts `messages` from the `from`-th on, in order, counting each one that got out but the
/// last (the caller finishes then).
fn deliver(
    work: &Work,
    messages: &[String],
    answer: &Answer,
    from: usize,
    job_id: &str,
    progress: &Progress,
) -> Result<(), Failure> {
    for (i, text) in messages.iter().enumerate().skip(from) {
        match work {
            Work::Event(event) | Work::Resumed(event) => {
                let mut message = json!({
                    "channel": event.channel,
                    "text": text,
                    "metadata": {
                        "event_type": REPLY_EVENT,
                        "event_payload": { "job": job_id, "part": i },
                    },
                });
                if let Some(thread_ts) = &event.thread_ts {
                    message["thread_ts"] = json!(thread_ts);
                }
                if let Some(approval) = &answer.approval {
                    message["blocks"] = approval::blocks(text, approval);
                }
                platform::post("chat.postMessage", &message)?;
            }
            Work::Command(command) => platform::respond(
                &command.response_url,
                &json!({ "response_type": "in_channel", "text": text }),
            )?,
        }
        // The last one is recorded by `finish`, the next write either way.
        if i + 1 < messages.len() {
            progress.keep(answer, i + 1);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=4).map(backoff_ms).collect();
        assert_eq!(waits, [2_000, 4_000, 8_000, 16_000]);
        assert_eq!(backoff_ms(30), MAX_BACKOFF_MS);
    }

    #[test]
    fn a_command_reply_keeps_to_what_a_response_url_takes() {
        let long = "word ".repeat(MESSAGE_CHARS * 2);
        let command = Work::Command(CommandJob {
            response_url: "https://hooks.slack.com/x".into(),
            prompt: "q".into(),
            answer: None,
        });
        let event = Work::Event(EventJob {
            channel: "C1".into(),
            thread_ts: None,
            ts: None,
            prompt: "q".into(),
            bot: None,
            direct: false,
            user: None,
        });
        let long = Answer {
            text: long,
            trace_id: None,
            failed: None,
            approval: None,
        };
        let all = messages(&event, &long);
        assert!(all.len() > RESPONSE_URL_MESSAGES, "{}", all.len());
        let parts = messages(&command, &long);
        assert_eq!(parts.len(), RESPONSE_URL_MESSAGES);
        assert_eq!(parts[..4], all[..4]);
        assert_eq!(parts.last().unwrap(), TOO_LONG);
    }
}
