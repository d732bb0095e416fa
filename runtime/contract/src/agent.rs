//! Running an agent: what adapters ask of the engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// Which profile a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileChoice {
    /// This profile, or the run fails (chat, delegation, schedules).
    Required(String),
    /// This profile when it exists, else the server defaults with no system prompt (adapters).
    Preferred(String),
}

impl ProfileChoice {
    /// The profile's name, however it is chosen.
    pub fn name(&self) -> &str {
        match self {
            Self::Required(name) | Self::Preferred(name) => name,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunRequest {
    pub prompt: String,
    /// Earlier turns of the conversation the prompt continues, oldest first.
    pub history: Vec<Turn>,
    pub profile: ProfileChoice,
    /// Overrides the profile's and the server's model.
    pub model: Option<String>,
    /// Where the run came from (`chat`, `cli`, an adapter name, `scheduler`, ...).
    pub source: String,
    pub parent: Option<Parent>,
    /// The adapter's own name for the conversation the prompt continues (a thread, a mail's
    /// thread): the host keeps its messages, sends the latest with the prompt (when `history`
    /// is empty) and answers one prompt of it at a time, in arrival order.
    pub conversation: Option<String>,
    /// Keep this turn's place in its conversation's line until the run's cancellation token
    /// fires, not only until the run ends: a caller whose token ends with its work on the
    /// answer (a component's call) then posts it before the next turn can post its own.
    pub turn_held_until_cancelled: bool,
    /// The task whose outcome this run is, when it may pause for a person's approval (a
    /// scheduled run): the task waits `pending` and the run finishes it once decided.
    pub task: Option<String>,
    /// The task this run is done in, which it does not own (a job's): the run names it (its
    /// title and agent, unless an earlier run of the task did) as its trace starts and links
    /// it to that trace as it ends, in the same round trips; the task's status stays its
    /// owner's business.
    pub in_task: Option<String>,
    /// Lets a run in a conversation (`conversation` set) pause for a person's approval: once
    /// it goes on, the source adapter gets a job with this payload, which learns where the
    /// run got to from the host.
    pub then: Option<Vec<u8>>,
    /// Who asked for it (`owner`, `user:<name>`, `token:<name>`): none for an adapter's or
    /// a schedule's run. A delegated run is its parent's.
    pub started_by: Option<String>,
}

impl RunRequest {
    /// A top-level run of `profile` on `prompt`, started by `source`, with the usual model.
    pub fn new(
        prompt: impl Into<String>,
        profile: ProfileChoice,
        source: impl Into<String>,
    ) -> Self {
        Self {
            prompt: prompt.into(),
            history: Vec::new(),
            profile,
            model: None,
            source: source.into(),
            parent: None,
            conversation: None,
            turn_held_until_cancelled: false,
            task: None,
            in_task: None,
            then: None,
            started_by: None,
        }
    }

    /// Who asked for the run, directly or through the run that delegated it.
    pub fn started_by(&self) -> Option<&str> {
        self.started_by
            .as_deref()
            .or_else(|| self.parent.as_ref()?.started_by.as_deref())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnRole {
    User,
    Assistant,
}

/// An earlier turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub role: TurnRole,
    pub text: String,
}

/// The latest of `turns` (oldest first) that fit `max_turns` and `max_chars` together, oldest
/// first: what is dropped to make room is always the oldest.
pub fn latest(turns: Vec<Turn>, max_turns: usize, max_chars: usize) -> Vec<Turn> {
    let mut kept = Vec::new();
    let mut chars = 0;
    for turn in turns.into_iter().rev().take(max_turns) {
        chars += turn.text.chars().count();
        if chars > max_chars {
            break;
        }
        kept.push(turn);
    }
    kept.reverse();
    kept
}

/// The run that delegated this one (directly, or through a tool that runs agents).
#[derive(Debug, Clone)]
pub struct Parent {
    pub trace_id: String,
    /// How many delegations deep the new run is.
    pub depth: u32,
    /// The LLM calls left to the whole tree of runs.
    pub budget: Budget,
    /// Who asked for the top-level run.
    pub started_by: Option<String>,
}

impl Parent {
    /// The same run seen from one more delegation down.
    pub fn child(&self) -> Self {
        Self {
            depth: self.depth + 1,
            ..self.clone()
        }
    }
}

/// LLM calls left to a top-level run and every run it delegates to, shared by all of them, so
/// no chain of delegations (through tools, components or agents) can call the model without
/// bound.
#[derive(Debug, Clone)]
pub struct Budget(Arc<AtomicU32>);

impl Budget {
    pub fn new(calls: u32) -> Self {
        Self(Arc::new(AtomicU32::new(calls)))
    }

    /// Takes one call; false when none is left.
    pub fn take(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReply {
    pub trace_id: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFailureKind {
    /// The request itself is wrong (an empty prompt).
    Invalid,
    UnknownAgent,
    /// No usable LLM provider is configured.
    NotConfigured,
    /// The provider or the loop failed.
    Failed,
    Cancelled,
    /// The run waits for a person to approve a tool call; it finishes its task later.
    Paused,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RunFailure {
    pub kind: RunFailureKind,
    pub message: String,
    /// The error trace of the failed run, when one was written.
    pub trace_id: Option<String>,
    /// What a paused run (`Paused`) waits for (boxed: failures travel in `Result`s).
    pub waiting: Option<Box<Waiting>>,
}

/// The tool call a paused run waits for a person to approve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub approval_id: String,
    pub tool: String,
    /// The call's arguments as JSON text.
    pub input: String,
}

/// Runs agents; every run records one trace.
pub trait AgentRunner: Send + Sync {
    fn run(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<RunReply, RunFailure>>;

    /// The active provider's name, as status cards show it.
    fn provider_name(&self) -> String;
}
