//! Everything the service holds, opened once from a data directory. The server and the CLI
//! commands build on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use service_contract::tools::ToolRegistry;
use service_contract::{
    Adapter, AdapterContext, AdapterRegistry, AgentRunner, ContextConfig, ErrorObserver, Secrets,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::a2a::RemoteAgents;
use crate::adapters::{DbApprovals, DbFeedback, DbTasks, Supervisor};
use crate::agents::profiles;
use crate::bus::Bus;
use crate::config::FileConfig;
use crate::db::{self, Backend, Db};
use crate::engine::pause::ApprovalRules;
use crate::engine::settings::ProviderSettings;
use crate::engine::tools::{self, BuiltinConfig};
use crate::engine::{DEFAULT_LLM_CALL_BUDGET, DEFAULT_MAX_ITERATIONS, Engine, EngineParts};
use crate::mcp::{self, McpServers};
use crate::replica;
use crate::scheduler::{self, Dispatcher, Scheduler};
use crate::settings_store::SettingsStore;
use crate::task_runs::AgentTasks;
use crate::tasks::RunningTasks;
use crate::telemetry::metrics::metrics;
use crate::wasm::{Components, Loader, Sandbox, Services, ToolBridge};

/// The native adapters' names, which no component may take.
pub const NATIVE_NAMES: [&str; 3] = [
    scheduler::NAME,
    service_guildchat::NAME,
    service_email::NAME,
];

pub struct App {
    pub data_dir: PathBuf,
    pub config: FileConfig,
    pub env: Arc<SettingsStore>,
    pub db: Db,
    /// This process among the replicas sharing the database.
    pub replica: String,
    pub engine: Arc<Engine>,
    /// Every adapter's lifecycle, native or component.
    pub supervisor: Arc<Supervisor>,
    /// Cancellation of work in progress, by task id.
    pub running: Arc<RunningTasks>,
    /// Runs schedules (the scheduler adapter and `schedule run` share it).
    pub dispatcher: Arc<Dispatcher>,
    /// WebAssembly adapters: which generation serves, hot reload, tools and jobs.
    pub components: Arc<Components>,
    /// Wakes the job worker when a job may be ready (enqueued here or elsewhere, a slot freed).
    pub jobs_ready: Arc<Notify>,
    /// What this replica changed that the others act on, and theirs.
    pub bus: Arc<Bus>,
    /// Cancelled when the server shuts down: runs still streaming to a client end then, so
    /// the graceful shutdown does not wait for them.
    pub shutdown: CancellationToken,
    /// The MCP servers whose tools agents may use (started by the commands that run agents).
    pub mcp: Arc<McpServers>,
    /// Remote agents of `[a2a]`, whose skills are tools here.
    pub a2a: Arc<RemoteAgents>,
    /// The agents as an MCP server (`/mcp`, `service-runtime mcp`).
    pub mcp_agents: mcp::Agents,
    /// Wakes the resumer when an approval is decided here.
    pub approvals_decided: Arc<Notify>,
    /// Runs' completion webhooks: checked when a run is given one, delivered by the server.
    pub webhooks: Arc<crate::completion_webhooks::RunWebhooks>,
}

/// Which process opens the state: the server (a replica with an id kept in the data
/// directory) or a one-off command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Command,
}

/// Creates the data directory if needed and opens (migrating) the database it uses, with the
/// `default` profile in place: PostgreSQL when `SERVICE_DATABASE_URL` is set (environment or
/// `.env`), else the directory's SQLite file. Commands that need no engine stop here.
pub async fn open_db(
    data_dir: &Path,
    env: &SettingsStore,
    config: &FileConfig,
) -> anyhow::Result<Db> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    let url = env.get(db::URL_VARIABLE);
    let db = Db::open(data_dir, url.as_deref(), config.database.pool_size()).await?;
    db.call(|conn| profiles::ensure_default(conn)).await?;
    Ok(db)
}

impl App {
    /// Creates the data directory if needed, loads configuration and secrets, migrates the
    /// database, bootstraps the `default` profile and builds the engine.
    pub async fn open(data_dir: &Path, role: Role) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let config = FileConfig::load(data_dir)?;
        let mut env = SettingsStore::load(data_dir)?;
        let replica = match role {
            Role::Server => replica::server_id(data_dir, &env)?,
            Role::Command => replica::command_id(),
        };
        let settings = ProviderSettings::load(&env, &config.provider)?;
        let max_iterations = config
            .engine
            .max_iterations
            .unwrap_or(DEFAULT_MAX_ITERATIONS);
        anyhow::ensure!(
            max_iterations >= 1,
            "invalid [engine] settings in config.toml: max_iterations must be at least 1, got {max_iterations}"
        );
        let db = open_db(data_dir, &env, &config).await?;
        if db.backend() == Backend::Postgres {
            env.share()?;
        }
        let env = Arc::new(env);
        let shared = Arc::clone(&env);
        db.call(move |conn| shared.reload_shared(conn)).await?;
        let bus = Bus::new(db.clone(), replica.clone());

        // A connection of their own for what guests and tools write (notes, kv, jobs), so
        // their writes never hold the one the API reads with.
        let side_db = db.another()?;
        let registry = Arc::new(ToolRegistry::new());
        tools::register_builtin(
            &registry,
            BuiltinConfig {
                db: side_db.clone(),
                env: Arc::clone(&env),
                data_dir: data_dir.to_owned(),
                web_search: config.tools.web_search.clone(),
            },
        )?;
        let engine = Engine::new(EngineParts {
            db: db.clone(),
            env: Arc::clone(&env),
            http: reqwest::Client::builder()
                .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(std::time::Duration::from_secs(10))
                .read_timeout(std::time::Duration::from_secs(
                    config.provider.timeout_secs.unwrap_or(120),
                ))
                .build()?,
            settings,
            max_iterations,
            llm_call_budget: config
                .engine
                .llm_call_budget
                .unwrap_or(DEFAULT_LLM_CALL_BUDGET),
            tools: registry,
            replica: replica.clone(),
            approvals: ApprovalRules::new(config.tools.approval.iter().cloned()),
            conversation_budget: config.conversations.budget(),
        })
        .context("invalid [engine] settings in config.toml")?;

        let mcp = McpServers::new(&config.mcp, Arc::clone(engine.tools()), Arc::clone(&env))?;
        let a2a = RemoteAgents::new(&config.a2a, Arc::clone(engine.tools()), Arc::clone(&env))?;
        if let Some(gated) = config
            .mcp_server
            .tools
            .iter()
            .find(|name| engine.tools().gate_of(name).is_some())
        {
            anyhow::bail!(
                "invalid [mcp_server] tools in config.toml: {gated:?} is gated, and gated tools \
                 are never served over MCP"
            );
        }
        let running = Arc::new(RunningTasks::default());
        let agents: Arc<dyn AgentRunner> = engine.clone();
        let agent_tasks = AgentTasks {
            db: db.clone(),
            agents: Arc::clone(&agents),
            running: Arc::clone(&running),
            replica: replica.clone(),
        };
        let dispatcher = Arc::new(Dispatcher {
            tasks: agent_tasks.clone(),
        });
        let shutdown = CancellationToken::new();
        let mcp_agents = mcp::Agents::new(
            db.clone(),
            agent_tasks.clone(),
            Arc::clone(engine.tools()),
            config.mcp_server.tools.clone(),
            shutdown.clone(),
            config.conversations.budget(),
        );
        let registry = Arc::new(AdapterRegistry::new());
        registry.observe_errors(ErrorObserver(Box::new(|adapter, kind| {
            metrics().limit_hit(adapter, kind);
        })));
        let approvals_decided = Arc::new(Notify::new());
        let adapter_approvals = DbApprovals {
            db: db.clone(),
            replica: replica.clone(),
            decided: Arc::clone(&approvals_decided),
        };
        let context = Arc::new(AdapterContext {
            config: ContextConfig {
                database_path: data_dir.join(db::FILE_NAME),
                // As chosen at start: the context is frozen (spec 2.6).
                default_provider: engine.provider_choice().kind.as_str().to_owned(),
                default_model: engine.provider_choice().model().to_owned(),
            },
            data_dir: data_dir.to_owned(),
            registry: Arc::clone(&registry),
            tool_registry: Some(Arc::clone(engine.tools())),
            agents: Arc::clone(&agents),
            approvals: Arc::new(adapter_approvals.clone()),
            secrets: Arc::clone(&env) as Arc<dyn Secrets>,
            tasks: Arc::new(DbTasks {
                db: db.clone(),
                replica: replica.clone(),
            }),
            feedback: Arc::new(DbFeedback(db.clone())),
        });
        let jobs_ready = Arc::new(Notify::new());
        // An adapter that starts serving may have jobs waiting: the worker looks again.
        let supervisor = Arc::new(Supervisor::new(
            context,
            db.clone(),
            Arc::clone(&jobs_ready),
        ));
        let natives: Vec<Arc<dyn Adapter>> = vec![
            Arc::new(Scheduler::new(db.clone(), Arc::clone(&dispatcher))),
            Arc::new(service_guildchat::GuildchatAdapter::new()),
            Arc::new(service_email::EmailAdapter::new()),
        ];
        debug_assert!(natives.iter().all(|a| NATIVE_NAMES.contains(&a.name())));
        let native_names = natives.iter().map(|a| a.name().to_owned()).collect();
        for native in natives {
            supervisor.add_native(native);
        }
        if env.get("SERVICE_DISABLE_SCHEDULER").as_deref() == Some("true") {
            supervisor.hold_back(
                scheduler::NAME,
                "disabled by SERVICE_DISABLE_SCHEDULER=true",
            );
        }

        let services = Arc::new(Services {
            db: side_db.clone(),
            env: Arc::clone(&env),
            registry,
            agents,
            agent_tasks,
            tools: Arc::clone(engine.tools()),
            bus: Arc::clone(&bus),
            // Components decide on their own connection, like the rest of what they write.
            approvals: DbApprovals {
                db: side_db.clone(),
                ..adapter_approvals
            },
            host: tokio::runtime::Handle::try_current()
                .context("the app is opened inside a tokio runtime")?,
        });
        let pooling = env.get("SERVICE_WASM_POOLING").as_deref() != Some("false");
        let sandbox = Arc::new(Sandbox::new(pooling, &config.sandbox)?);
        let loader = Loader::new(
            sandbox,
            services,
            data_dir,
            config.adapters.clone(),
            crate::wasm::bundled::BUNDLED,
            native_names,
        );
        std::fs::create_dir_all(loader.adapters_dir())?;
        let tools = ToolBridge::new(Arc::clone(engine.tools()), Arc::downgrade(&supervisor));
        let components = Arc::new(Components::new(loader, Arc::clone(&supervisor), tools));
        let webhooks = Arc::new(crate::completion_webhooks::RunWebhooks::new(
            db.clone(),
            Arc::clone(&env),
            config.webhooks,
            replica.clone(),
        ));
        Ok(Self {
            data_dir: data_dir.to_owned(),
            config,
            env,
            db,
            replica,
            engine,
            supervisor,
            running,
            dispatcher,
            components,
            jobs_ready,
            bus,
            shutdown,
            mcp,
            a2a,
            mcp_agents,
            approvals_decided,
            webhooks,
        })
    }
}
