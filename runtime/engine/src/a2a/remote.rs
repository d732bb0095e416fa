//! The configured remote agents: each one's card fetched (again on failure with backoff, and
//! every few minutes while it is fine, so new skills show up), its skills registered as
//! `a2a__<agent>__<skill>`, its state and its calls' last failure shown on its status. A card
//! that cannot be read keeps the skills of the last one that could.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{ACCEPT, HeaderMap, LOCATION};
use serde::Serialize;
use serde_json::Value;
use service_contract::tools::{Tool, ToolContext, ToolRegistry};
use tokio_util::sync::CancellationToken;

use super::card::{self, Card, MAX_CARD_BYTES, MAX_SKILLS};
use super::client::{Agent, Ask, Unread, bounded};
use super::settings::{A2aSection, Remote};
use crate::db;
use crate::kept::{self, Keepers, Shown};
use crate::mcp::tools::prefixed;
use crate::placeholders;
use crate::settings_store::SettingsStore;

/// Pauses between failed fetches double from the first to the last.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LAST_PAUSE: Duration = Duration::from_secs(60);
/// A card that was read is read again this often.
const REFRESH: Duration = Duration::from_secs(300);

/// A remote agent as `GET /api/a2a/agents` shows it (never its headers).
pub use crate::kept::State;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = RemoteAgentStatus)]
pub struct Status {
    pub name: String,
    /// Where its card is.
    pub card_url: String,
    pub state: State,
    /// Its name and version, as its card gives them.
    pub agent: Option<String>,
    /// Where it is called.
    pub endpoint: Option<String>,
    pub streaming: bool,
    /// Skills registered as tools.
    pub tools: usize,
    /// Skills not offered, each with why.
    pub skipped: Vec<String>,
    /// Why its card cannot be used.
    pub error: Option<String>,
    pub error_at: Option<String>,
    pub calls: u64,
    pub failed_calls: u64,
    /// Why its last failed call failed.
    pub last_call_error: Option<String>,
    pub last_call_error_at: Option<String>,
}

struct Slot {
    remote: Remote,
    status: Shown<Status>,
    /// The card its tools call, once one was read.
    card: Mutex<Option<Arc<Card>>>,
    /// The registry names of its tools.
    registered: Mutex<Vec<String>>,
}

pub struct RemoteAgents {
    slots: Vec<Arc<Slot>>,
    registry: Arc<ToolRegistry>,
    env: Arc<SettingsStore>,
    /// Follows no redirect: a card or an endpoint that moved is an error on the entry.
    http: reqwest::Client,
    card_timeout: Duration,
    keepers: Keepers,
}

impl RemoteAgents {
    /// The agents of `[a2a]`, not fetched yet; their tool names are known to the registry
    /// from now on.
    pub fn new(
        section: &A2aSection,
        registry: Arc<ToolRegistry>,
        env: Arc<SettingsStore>,
    ) -> anyhow::Result<Arc<Self>> {
        let card_timeout = section.card_timeout()?;
        let slots = section
            .remotes()?
            .into_iter()
            .map(|remote| {
                registry.add_source(
                    &prefix(&remote.name),
                    &format!("the A2A agent {:?}", remote.name),
                );
                Arc::new(Slot {
                    status: Shown::new(Status {
                        name: remote.name.clone(),
                        card_url: remote.card_url.to_string(),
                        state: State::Connecting,
                        agent: None,
                        endpoint: None,
                        streaming: false,
                        tools: 0,
                        skipped: Vec::new(),
                        error: None,
                        error_at: None,
                        calls: 0,
                        failed_calls: 0,
                        last_call_error: None,
                        last_call_error_at: None,
                    }),
                    remote,
                    card: Mutex::default(),
                    registered: Mutex::default(),
                })
            })
            .collect();
        let http = reqwest::Client::builder()
            .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Arc::new(Self {
            slots,
            registry,
            env,
            http,
            card_timeout,
            keepers: Keepers::default(),
        }))
    }

    /// Reads every agent's card and keeps reading it until [`RemoteAgents::stop`].
    pub fn start(self: &Arc<Self>) {
        for slot in &self.slots {
            self.keepers.spawn(Arc::clone(self).keep(Arc::clone(slot)));
        }
    }

    pub fn stop(&self) -> BoxFuture<'_, ()> {
        self.keepers.stop()
    }

    /// Returns once every card was read or failed to be (bounded by the card timeout), so a
    /// one-off run sees the tools there are.
    pub async fn settled(&self) {
        let first_try = |status: &Status| status.state == State::Connecting;
        kept::settled(self.card_timeout + Duration::from_secs(1), || {
            self.statuses().iter().any(first_try)
        })
        .await;
    }

    pub fn statuses(&self) -> Vec<Status> {
        self.slots.iter().map(|slot| slot.status()).collect()
    }

    async fn keep(self: Arc<Self>, slot: Arc<Slot>) {
        let mut pause = FIRST_PAUSE;
        loop {
            let read = tokio::select! {
                read = tokio::time::timeout(self.card_timeout, self.fetch(&slot)) => read,
                () = self.keepers.stopped() => return,
            };
            let wait = match read {
                Ok(Ok(card)) => {
                    self.register(&slot, card);
                    pause = FIRST_PAUSE;
                    REFRESH
                }
                Ok(Err(e)) => {
                    slot.fail(e);
                    pause = (pause * 2).min(LAST_PAUSE);
                    pause / 2
                }
                Err(_) => {
                    slot.fail(format!(
                        "its card did not come within {} s",
                        self.card_timeout.as_secs()
                    ));
                    pause = (pause * 2).min(LAST_PAUSE);
                    pause / 2
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.keepers.stopped() => return,
            }
        }
    }

    fn headers(&self, remote: &Remote) -> Result<HeaderMap, String> {
        let secret = |name: &str| {
            self.env
                .get(name)
                .ok_or_else(|| format!("{name} is not set (environment or .env)"))
        };
        Ok(placeholders::headers(&remote.headers, &secret)?
            .into_iter()
            .collect())
    }

    /// The agent's card, read and checked: redirects are refused, its size bounded.
    async fn fetch(&self, slot: &Slot) -> Result<Card, String> {
        let url = &slot.remote.card_url;
        let response = self
            .http
            .get(url.clone())
            .headers(self.headers(&slot.remote)?)
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("cannot fetch its card: {e}"))?;
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(LOCATION)
                .and_then(|to| to.to_str().ok())
                .unwrap_or("nowhere said");
            return Err(format!(
                "its card redirects ({status}) to {to}; redirects are not followed: set url to \
                 where the agent is"
            ));
        }
        if !status.is_success() {
            return Err(format!("its card answered HTTP {status}"));
        }
        let body = bounded(response, MAX_CARD_BYTES)
            .await
            .map_err(|e| match e {
                Unread::TooLong => format!("its card is larger than {MAX_CARD_BYTES} bytes"),
                Unread::Failed(e) => format!("cannot read its card: {e}"),
            })?;
        card::read(&body, url)
    }

    /// Registers the card's skills in place of the last card's.
    fn register(self: &Arc<Self>, slot: &Arc<Slot>, card: Card) {
        let card = Arc::new(card);
        *slot.card.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&card));
        let mut registered = slot
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for name in registered.drain(..) {
            self.registry.unregister(&name);
        }
        let mut skipped = Vec::new();
        for skill in &card.skills {
            if registered.len() == MAX_SKILLS {
                skipped.push(format!("{}: past the first {MAX_SKILLS} skills", skill.id));
                continue;
            }
            match self.tool(slot, &skill.id, &skill.description) {
                Ok(name) => registered.push(name),
                Err(e) => skipped.push(format!("{}: {e}", skill.id)),
            }
        }
        let count = registered.len();
        slot.update(|status| {
            status.state = State::Ready;
            status.agent = Some(card.agent.clone());
            status.endpoint = Some(card.endpoint.to_string());
            status.streaming = card.streaming;
            status.tools = count;
            status.skipped = skipped;
            status.error = None;
            status.error_at = None;
        });
    }

    /// Registers one skill as a named-only tool; its registry name.
    fn tool(
        self: &Arc<Self>,
        slot: &Arc<Slot>,
        skill: &str,
        description: &str,
    ) -> Result<String, String> {
        let name = prefixed(&prefix(&slot.remote.name), skill)
            .ok_or("its id is too long for a tool name")?;
        let (agents, slot, skill) = (Arc::clone(self), Arc::clone(slot), skill.to_owned());
        let handler = move |input: Value, ctx: ToolContext| {
            let (agents, slot, skill) = (Arc::clone(&agents), Arc::clone(&slot), skill.clone());
            async move { agents.call(&slot, &skill, &input, &ctx.cancel).await }
        };
        let tool = Tool::new(&name, description, parameters(), handler).named_only();
        self.registry
            .register(tool, false)
            .map_err(|e| e.to_string())?;
        Ok(name)
    }

    /// Asks the agent, as a skill's tool call; a failure is also kept on its status.
    async fn call(
        &self,
        slot: &Slot,
        skill: &str,
        input: &Value,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let text = |name: &str| input[name].as_str().filter(|text| !text.is_empty());
        let message = text("message").ok_or("message (what to ask the agent) is required")?;
        let card = slot
            .card
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| format!("the A2A agent {:?} has no card yet", slot.remote.name))?;
        let agent = Arc::new(Agent {
            http: self.http.clone(),
            name: slot.remote.name.clone(),
            endpoint: card.endpoint.clone(),
            headers: self.headers(&slot.remote)?,
            streaming: card.streaming,
        });
        let ask = Ask {
            skill,
            message,
            context_id: text("context_id"),
            task_id: text("task_id"),
        };
        let answer = agent.ask(&ask, slot.remote.call_timeout, cancel).await;
        slot.update(|status| {
            status.calls += 1;
            if let Err(e) = &answer {
                status.failed_calls += 1;
                status.last_call_error = Some(e.clone());
                status.last_call_error_at = Some(db::now());
            }
        });
        if let Err(e) = &answer {
            tracing::warn!(a2a_agent = %slot.remote.name, skill, "call failed: {e}");
        }
        answer
    }
}

/// What every skill of `agent` is named with.
fn prefix(agent: &str) -> String {
    format!("a2a__{agent}__")
}

/// A skill's input: what to ask, and where it goes on.
fn parameters() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "What to ask the agent."},
            "context_id": {
                "type": "string",
                "description": "To go on in an earlier conversation with the agent: the context_id its answer gave.",
            },
            "task_id": {
                "type": "string",
                "description": "To answer the agent when it asked for more: the task_id it gave.",
            },
        },
        "required": ["message"],
    })
}

impl Slot {
    fn status(&self) -> Status {
        self.status.get()
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        self.status.update(change);
    }

    fn fail(&self, error: String) {
        tracing::warn!(a2a_agent = %self.remote.name, "{error}");
        self.update(|status| {
            status.state = State::Error;
            status.error = Some(error);
            status.error_at = Some(db::now());
        });
    }
}
