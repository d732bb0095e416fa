//! Test doubles for the host side (agents, tasks, feedback, secrets) and a harness that runs the
//! adapter with them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    Adapter, AdapterContext, AdapterEntry, AdapterKind, AdapterRegistry, AdapterStatus,
    AgentRunner, ContextConfig, Feedback, FeedbackStore, RunFailure, RunFailureKind, RunReply,
    RunRequest, Secrets, TaskState, TaskTracker,
};
use service_guildchat::GuildchatAdapter;
use tokio_util::sync::CancellationToken;

// The one way tests and benches wait (these tests use a part of it).
#[allow(dead_code)]
#[path = "../../../../tests/shared/wait.rs"]
mod wait;

pub const TOKEN: &str = "good-token";

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers every prompt at once: `long` asks for a 4500-character reply, `fail` for a failed
/// run, `silent` for a blank reply, anything else is echoed.
#[derive(Default)]
pub struct Agents {
    pub requests: Mutex<Vec<RunRequest>>,
}

pub fn long_reply() -> String {
    format!("{}\n", "x".repeat(89)).repeat(50)
}

impl AgentRunner for Agents {
    fn run(
        &self,
        request: RunRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<RunReply, RunFailure>> {
        let trace_id = format!("trace-{}", lock(&self.requests).len() + 1);
        let outcome = if request.prompt.contains("fail") {
            Err(RunFailure {
                kind: RunFailureKind::Failed,
                message: "provider said: key sk-123 is invalid".to_owned(),
                trace_id: Some(trace_id),
                waiting: None,
            })
        } else if request.prompt.contains("long") {
            Ok(RunReply {
                trace_id,
                text: long_reply(),
            })
        } else if request.prompt.contains("silent") {
            Ok(RunReply {
                trace_id,
                text: " \n".to_owned(),
            })
        } else {
            let text = format!("answer: {}", request.prompt);
            Ok(RunReply { trace_id, text })
        };
        lock(&self.requests).push(request);
        async move { outcome }.boxed()
    }

    fn provider_name(&self) -> String {
        "fake-provider".to_owned()
    }
}

#[derive(Default)]
pub struct Tasks {
    /// (task id, title, agent) per created task.
    pub created: Mutex<Vec<(String, String, Option<String>)>>,
    pub updates: Mutex<Vec<(String, TaskState, Option<String>)>>,
}

impl TaskTracker for Tasks {
    fn create(
        &self,
        title: &str,
        agent: Option<&str>,
    ) -> BoxFuture<'static, Result<String, String>> {
        let mut created = lock(&self.created);
        let id = format!("task-{}", created.len() + 1);
        created.push((id.clone(), title.to_owned(), agent.map(str::to_owned)));
        async move { Ok(id) }.boxed()
    }

    fn update(
        &self,
        task_id: &str,
        state: TaskState,
        trace_id: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        lock(&self.updates).push((task_id.to_owned(), state, trace_id.map(str::to_owned)));
        async { Ok(()) }.boxed()
    }
}

#[derive(Default)]
pub struct Votes {
    pub recorded: Mutex<Vec<Feedback>>,
}

impl FeedbackStore for Votes {
    fn record(&self, feedback: Feedback) -> BoxFuture<'static, Result<(), String>> {
        lock(&self.recorded).push(feedback);
        async { Ok(()) }.boxed()
    }
}

struct MapSecrets(HashMap<String, String>);

impl Secrets for MapSecrets {
    fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).filter(|v| !v.is_empty()).cloned()
    }
}

/// The adapter with in-memory host services.
pub struct Harness {
    pub adapter: GuildchatAdapter,
    pub ctx: Arc<AdapterContext>,
    pub agents: Arc<Agents>,
    pub tasks: Arc<Tasks>,
    pub votes: Arc<Votes>,
}

impl Harness {
    pub fn new(settings: Vec<(&'static str, String)>) -> Self {
        let registry = Arc::new(AdapterRegistry::new());
        registry.insert(AdapterEntry::new("guildchat", AdapterKind::Native));
        let (agents, tasks, votes) = (
            Arc::<Agents>::default(),
            Arc::<Tasks>::default(),
            Arc::<Votes>::default(),
        );
        let secrets = settings
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let ctx = Arc::new(AdapterContext {
            config: ContextConfig {
                database_path: PathBuf::from("unused.db"),
                default_provider: "fake-provider".to_owned(),
                default_model: "fake-model".to_owned(),
            },
            data_dir: PathBuf::from("."),
            registry,
            tool_registry: None,
            agents: agents.clone(),
            approvals: Arc::new(service_contract::NoApprovals),
            secrets: Arc::new(MapSecrets(secrets)),
            tasks: tasks.clone(),
            feedback: votes.clone(),
        });
        Self {
            adapter: GuildchatAdapter::new(),
            ctx,
            agents,
            tasks,
            votes,
        }
    }

    pub async fn start(&self) {
        self.adapter
            .start(&self.ctx)
            .expect("start is a hook")
            .await
            .expect("start never fails");
    }

    pub async fn stop(&self) {
        self.adapter
            .stop()
            .expect("stop is a hook")
            .await
            .expect("stop never fails");
    }

    pub fn entry(&self) -> AdapterEntry {
        self.ctx.registry.get("guildchat").unwrap()
    }

    /// Starts and waits for the gateway session to be ready.
    pub async fn start_ready(&self) {
        self.start().await;
        wait_for("the adapter to be running", || {
            (self.entry().status == AdapterStatus::Running).then_some(())
        })
        .await;
    }

    pub fn prompts(&self) -> Vec<RunRequest> {
        lock(&self.agents.requests).clone()
    }
}

/// Polls `check` until it gives a value, for at most 10 seconds.
pub async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, Duration::from_secs(10), async || check()).await
}
