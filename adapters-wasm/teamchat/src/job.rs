//! What a queued job carries: a reply to an event (posted with `chat.postMessage`), to a slash
//! command (posted to its `response_url`), or the rest of an event's answer once a run that
//! waited for a person's approval went on (queued by the host, posted like an event's reply).
//! Stored as JSON; a payload without `kind` was queued by an earlier version, which queued
//! event replies only.

use serde_json::{Value, json};

/// A mention or direct message to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventJob {
    pub channel: String,
    /// Set when the message was inside a thread: the reply goes there.
    pub thread_ts: Option<String>,
    /// The message's own timestamp: the conversation before it is the context.
    pub ts: Option<String>,
    pub prompt: String,
    /// The bot's user id, which tells its own earlier messages apart.
    pub bot: Option<String>,
    /// A direct conversation (its history is the context) rather than a channel.
    pub direct: bool,
    /// Who asked: they may approve the tool calls their question leads to.
    pub user: Option<String>,
}

impl EventJob {
    /// The conversation the runtime keeps for it: the direct conversation, or the thread the
    /// mention is in (or the one replies to it would start: a later mention there continues it).
    pub fn conversation(&self) -> String {
        if self.direct {
            return self.channel.clone();
        }
        let thread = self
            .thread_ts
            .as_deref()
            .or(self.ts.as_deref())
            .unwrap_or_default();
        format!("{}/{thread}", self.channel)
    }
}

/// A slash command answered later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandJob {
    pub response_url: String,
    pub prompt: String,
    /// The answer, when the agent already gave it inline but it needs several messages.
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    Event(EventJob),
    Command(CommandJob),
    /// The event's run went on after an approval: the host queued this with the payload
    /// `then` gave, and says where the run got to.
    Resumed(EventJob),
}

impl Work {
    pub fn to_bytes(&self) -> Vec<u8> {
        let event = |kind: &str, e: &EventJob| {
            json!({
                "kind": kind, "channel": e.channel, "thread_ts": e.thread_ts, "ts": e.ts,
                "prompt": e.prompt, "bot": e.bot, "direct": e.direct, "user": e.user,
            })
        };
        let value = match self {
            Self::Event(e) => event("event", e),
            Self::Resumed(e) => event("resumed", e),
            Self::Command(c) => json!({
                "kind": "command", "response_url": c.response_url, "prompt": c.prompt,
                "answer": c.answer,
            }),
        };
        value.to_string().into_bytes()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("bad job payload: {e}"))?;
        let field = |name: &str| value[name].as_str().map(str::to_owned);
        let required =
            |name: &str| field(name).ok_or_else(|| format!("job payload without {name}"));
        let event = || -> Result<EventJob, String> {
            Ok(EventJob {
                channel: required("channel")?,
                thread_ts: field("thread_ts"),
                ts: field("ts"),
                prompt: required("prompt")?,
                bot: field("bot"),
                direct: value["direct"] == true,
                user: field("user"),
            })
        };
        match value["kind"].as_str() {
            None | Some("event") => Ok(Self::Event(event()?)),
            Some("resumed") => Ok(Self::Resumed(event()?)),
            Some("command") => Ok(Self::Command(CommandJob {
                response_url: required("response_url")?,
                prompt: required("prompt")?,
                answer: field("answer"),
            })),
            Some(other) => Err(format!("unknown job kind {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_old_ones_still_read() {
        let event = Work::Event(EventJob {
            channel: "C1".into(),
            thread_ts: Some("1.2".into()),
            ts: Some("1.3".into()),
            prompt: "hi".into(),
            bot: Some("UBOT".into()),
            direct: false,
            user: Some("U1".into()),
        });
        let resumed = match &event {
            Work::Event(e) => Work::Resumed(e.clone()),
            _ => unreachable!(),
        };
        let command = Work::Command(CommandJob {
            response_url: "https://hooks.slack.com/commands/1".into(),
            prompt: "q".into(),
            answer: None,
        });
        for work in [event, resumed, command] {
            assert_eq!(Work::from_bytes(&work.to_bytes()), Ok(work));
        }
        let old = br#"{"channel":"C1","thread_ts":null,"prompt":"hello"}"#;
        let Ok(Work::Event(job)) = Work::from_bytes(old) else {
            panic!("an earlier version's payload");
        };
        assert_eq!(
            (job.channel.as_str(), job.ts, job.direct),
            ("C1", None, false)
        );
        assert!(Work::from_bytes(br#"{"kind":"command"}"#).is_err());
        assert!(Work::from_bytes(br#"{"kind":"other"}"#).is_err());
    }

    #[test]
    fn a_thread_or_a_direct_conversation_is_one_conversation() {
        let event = |thread_ts: Option<&str>, direct: bool| EventJob {
            channel: "C1".into(),
            thread_ts: thread_ts.map(Into::into),
            ts: Some("1.3".into()),
            prompt: "hi".into(),
            bot: None,
            direct,
            user: None,
        };
        assert_eq!(event(Some("1.2"), false).conversation(), "C1/1.2");
        assert_eq!(
            event(None, false).conversation(),
            "C1/1.3",
            "the thread it would start"
        );
        assert_eq!(event(None, true).conversation(), "C1");
    }
}
