//! The host: loaded adapter generations by name, per-call stores with deadlines and memory
//! limits, discovery of `<data_dir>/adapters/*.wasm`, and hot reload. A failing component
//! only ever affects its own requests and its own registry entry.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use service_contract::{AdapterEntry, AdapterKind, AdapterStatus, Tool};
use tokio::sync::{Semaphore, SemaphorePermit};
use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Engine, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::bindings::{AdapterHost, types};
use super::bundled::{Bundled, NOT_BUILT};
use super::component::{self, Exports};
use super::engine;
use super::grants::{Grant, Request};
use super::outbound::Outbound;
use super::state::{Caller, HostState, STDERR_CAPACITY, Services};
use crate::adapters;

/// `describe` must answer at once.
const DESCRIBE_LIMIT: Duration = Duration::from_secs(1);
/// Host routes that components may not claim.
const RESERVED: &[&str] = &["/enable", "/disable"];

/// One loaded version of an adapter. In-flight calls keep the generation they started on.
pub struct Generation {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub metadata: Vec<(String, String)>,
    pre: InstancePre<HostState>,
    exports: Exports,
    caller: Arc<Caller>,
}

/// An HTTP exchange with a component.
pub type HttpRequest = types::HttpRequest;
pub type HttpResponse = types::HttpResponse;

/// Why a call did not produce an answer; `status` is what the HTTP client gets.
#[derive(Debug)]
pub struct CallError {
    pub status: u16,
    /// The whole story, for the registry entry, a job's task and a tool's result.
    pub message: String,
    /// What an outside HTTP caller is told: no trap text or guest output, which the
    /// operator reads on the registry entry.
    pub public: String,
}

impl CallError {
    fn new(status: u16, message: String) -> Self {
        Self {
            status,
            public: message.clone(),
            message,
        }
    }
}

pub struct WasmHost {
    engine: Engine,
    pooled: bool,
    linker: Linker<HostState>,
    services: Arc<Services>,
    cache_dir: PathBuf,
    adapters_dir: PathBuf,
    /// Grants from `[adapters.<name>]` in config.toml (a grant file beside the component wins).
    config_grants: BTreeMap<String, Grant>,
    /// Bundled components and their default grants.
    bundled: &'static [Bundled],
    generations: RwLock<HashMap<String, Arc<Generation>>>,
    /// What the last scan saw of each adapter's files; a file that failed to load stays here,
    /// so it is tried again only once it changes.
    seen: std::sync::Mutex<BTreeMap<String, Files>>,
    disabled: RwLock<HashSet<String>>,
    /// Taken by everything that runs `start` or `stop` (install, unload, toggle, shutdown), so
    /// hooks never interleave and never run twice for one change.
    lifecycle: tokio::sync::Mutex<()>,
    /// Tools each adapter registered, removed again when it unloads.
    tools: std::sync::Mutex<HashMap<String, Vec<String>>>,
    permits: Semaphore,
    this: std::sync::Weak<WasmHost>,
}

/// An adapter's files in the adapters folder, as (length, modified) stamps: a changed stamp
/// is a changed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Files {
    wasm: Option<(PathBuf, Stamp)>,
    grant: Option<Stamp>,
}

type Stamp = (u64, SystemTime);

fn lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

impl WasmHost {
    pub fn new(
        services: Arc<Services>,
        data_dir: &Path,
        config_grants: BTreeMap<String, Grant>,
        bundled: &'static [Bundled],
        pooling: bool,
    ) -> anyhow::Result<Arc<Self>> {
        let (engine, pooled) = engine::build(pooling)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        super::caps::shadow_preopens(&mut linker)?;
        AdapterHost::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
            &mut linker,
            |s| s,
        )?;
        let adapters_dir = data_dir.join("adapters");
        std::fs::create_dir_all(&adapters_dir)?;
        Ok(Arc::new_cyclic(|this| Self {
            this: this.clone(),
            tools: Default::default(),
            engine,
            pooled,
            linker,
            services,
            cache_dir: data_dir.join("cache"),
            adapters_dir,
            config_grants,
            bundled,
            generations: RwLock::default(),
            seen: Default::default(),
            disabled: RwLock::default(),
            lifecycle: tokio::sync::Mutex::new(()),
            permits: Semaphore::new(engine::MAX_INSTANCES),
        }))
    }

    pub fn pooled(&self) -> bool {
        self.pooled
    }

    pub fn generation(&self, name: &str) -> Option<Arc<Generation>> {
        lock(&self.generations).get(name).cloned()
    }

    fn store(
        &self,
        caller: Arc<Caller>,
        memory: usize,
        limit: Duration,
    ) -> (Store<HostState>, MemoryOutputPipe) {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut store = Store::new(&self.engine, HostState::new(caller, memory, stderr.clone()));
        store.limiter(|state| &mut state.limits);
        store.set_epoch_deadline(engine::ticks(limit));
        store.epoch_deadline_trap();
        (store, stderr)
    }

    /// The grant of an adapter: its TOML file, else config.toml, else the bundled default.
    fn grant_for(&self, name: &str) -> anyhow::Result<Grant> {
        let path = self.adapters_dir.join(format!("{name}.toml"));
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return Grant::parse(&text)
                    .map_err(|e| anyhow::anyhow!("invalid grant {}: {e}", path.display()));
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            Err(_) => {}
        }
        if let Some(grant) = self.config_grants.get(name) {
            return Ok(grant.clone());
        }
        match self.bundled(name) {
            Some(bundled) => Grant::parse(bundled.grant).map_err(anyhow::Error::msg),
            None => Ok(Grant::default()),
        }
    }

    /// Compiles, checks and describes a component without installing it. `expected` is the
    /// name its file implies.
    pub async fn load(&self, expected: &str, bytes: Vec<u8>) -> anyhow::Result<Arc<Generation>> {
        self.load_with(Some(expected), bytes, None).await
    }

    /// [`WasmHost::load`] for a component of any name, checked against `grant` when given
    /// instead of the grant on disk (`adapters install` validates before copying).
    pub async fn load_with(
        &self,
        expected: Option<&str>,
        bytes: Vec<u8>,
        grant: Option<Grant>,
    ) -> anyhow::Result<Arc<Generation>> {
        let (engine, cache) = (self.engine.clone(), self.cache_dir.clone());
        let compiled =
            tokio::task::spawn_blocking(move || component::compile(&engine, &cache, &bytes))
                .await??;
        let (pre, exports) = component::prepare(&self.linker, &compiled.component)?;

        // describe() runs with no capabilities at all.
        let nothing = Arc::new(Caller {
            adapter: expected.unwrap_or("new component").to_owned(),
            effective: Default::default(),
            outbound: Outbound::new(&Default::default())?,
            services: Arc::clone(&self.services),
        });
        let (mut store, stderr) = self.store(nothing, 64 << 20, DESCRIBE_LIMIT);
        let description = async {
            let instance = pre.instantiate_async(&mut store).await?;
            exports
                .handler
                .load(&mut store, &instance)?
                .call_describe(&mut store)
                .await
        };
        let description = tokio::time::timeout(DESCRIBE_LIMIT * 2, description)
            .await
            .map_err(|_| anyhow::anyhow!("describe did not answer within {DESCRIBE_LIMIT:?}"))?
            .map_err(|e| {
                anyhow::anyhow!(
                    "describe failed: {}",
                    trap_text(&e, &String::from_utf8_lossy(&stderr.contents()))
                )
            })?;

        if let Some(expected) = expected
            && description.name != expected
        {
            anyhow::bail!(
                "the file is named {expected:?} but the component describes itself as {:?}",
                description.name
            );
        }
        let name = description.name.clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            anyhow::bail!("adapter name {name:?} is not valid: use letters, digits, '-' and '_'");
        }
        let expected = name.as_str();
        for route in &description.routes {
            if !route.path.starts_with('/') || RESERVED.contains(&route.path.as_str()) {
                anyhow::bail!(
                    "route {} {} is not allowed: routes live under /api/adapters/{expected}/ and /enable, /disable are the host's",
                    route.method,
                    route.path
                );
            }
        }
        let capabilities = &description.capabilities;
        let request = Request {
            secrets: capabilities
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.required))
                .collect(),
            outbound_hosts: capabilities.outbound_hosts.clone(),
            agent: capabilities.agent,
            tools: capabilities.tools.clone(),
            kv: capabilities.kv,
            jobs: capabilities.jobs,
        };
        let grant = match grant {
            Some(grant) => grant,
            None => self.grant_for(expected)?,
        }
        .resolve_env(|name| self.services.env.get(name))
        .map_err(anyhow::Error::msg)?;
        let effective = component::grant_check(&compiled.imports, &request, &grant)?;
        let caller = Arc::new(Caller {
            adapter: expected.to_owned(),
            outbound: Outbound::new(&effective)?,
            effective,
            services: Arc::clone(&self.services),
        });
        Ok(Arc::new(Generation {
            name: expected.to_owned(),
            version: description.version,
            sha256: compiled.sha256,
            metadata: description.metadata,
            pre,
            exports,
            caller,
        }))
    }

    /// Makes `generation` the one that serves its name, brings its registry entry and its
    /// tools up to date, and runs the lifecycle: `stop` of the generation it replaces, then
    /// its own `start` (unless the operator disabled the adapter).
    pub async fn install(&self, generation: Arc<Generation>) {
        let _lifecycle = self.lifecycle.lock().await;
        let name = generation.name.clone();
        if generation.exports.lifecycle.is_none() && self.is_disabled(&name) {
            // A version without start and stop could never be enabled again.
            self.set_enabled(&name, true);
            if let Err(e) = adapters::remember_toggle(&self.services.db, &name, true).await {
                tracing::warn!(adapter = %name, "cannot forget that it was disabled: {e}");
            }
        }
        tracing::info!(adapter = %name, version = %generation.version, sha256 = %&generation.sha256[..12], "component loaded");
        let replaced = self
            .generations
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone(), Arc::clone(&generation));
        self.publish(&generation);
        self.register_tools(&generation).await;
        if !self.is_disabled(&name) {
            // Failures are on the entry already; the generation serves regardless.
            if let Some(replaced) = replaced {
                let _ = self.hook(&replaced, false).await;
            }
            if self.hook(&generation, true).await.is_ok() {
                self.settle(&generation);
            }
        }
    }

    /// The registry entry of the generation that serves: its version, grant and metadata, and
    /// a fresh status (stopped when disabled, else running, or `error` naming unset required
    /// secrets). The error count is kept.
    fn publish(&self, generation: &Generation) {
        let registry = &self.services.registry;
        let name = &generation.name;
        let mut entry = registry
            .get(name)
            .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
        entry.kind = AdapterKind::Wasm;
        entry.version = Some(generation.version.clone());
        entry.capabilities = generation.caller.effective.summary();
        entry.supports_toggle = generation.exports.lifecycle.is_some();
        entry.metadata = generation.metadata.iter().cloned().collect();
        let disabled = self.is_disabled(name);
        entry.status = if disabled {
            AdapterStatus::Stopped
        } else {
            AdapterStatus::Running
        };
        entry.note = disabled.then(|| "disabled from the dashboard".to_owned());
        registry.insert(entry);
        if let Some(unset) = self.unset_secrets(generation).filter(|_| !disabled) {
            registry.mark_error(name, "ConfigError", &unset);
        }
    }

    /// After a successful `start`: running, unless required secrets are unset (which the
    /// entry already says).
    fn settle(&self, generation: &Generation) {
        if self.unset_secrets(generation).is_none() {
            self.services.registry.mark_running(&generation.name);
        }
    }

    /// `NAME is not set` for each granted required secret without a value.
    fn unset_secrets(&self, generation: &Generation) -> Option<String> {
        let unset: Vec<String> = generation
            .caller
            .effective
            .required_secrets
            .iter()
            .filter(|secret| self.services.env.get(secret).is_none())
            .map(|secret| format!("{secret} is not set"))
            .collect();
        (!unset.is_empty()).then(|| unset.join("; "))
    }

    /// Runs a component's `start` or `stop` export, when it has them. A hook that returns an
    /// error is recorded on the entry as `HookError`, like a trap or a timeout.
    async fn hook(&self, generation: &Generation, start: bool) -> Result<(), CallError> {
        let Some(lifecycle) = &generation.exports.lifecycle else {
            return Ok(());
        };
        let permit = self.permit().await;
        let limit = generation.caller.effective.limits.handle_http();
        let outcome = self
            .call(permit, generation, limit, async |store, instance, _| {
                let guest = lifecycle.load(&mut *store, instance)?;
                if start {
                    guest.call_start(&mut *store).await
                } else {
                    guest.call_stop(&mut *store).await
                }
            })
            .await?;
        outcome.map_err(|message| {
            let hook = if start { "start" } else { "stop" };
            let message = format!("{hook} failed: {message}");
            self.services
                .registry
                .mark_error(&generation.name, "HookError", &message);
            CallError::new(500, message)
        })
    }

    /// Runs `stop` of every loaded component in reverse name order (shutdown).
    pub async fn stop_all(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        let mut loaded: Vec<Arc<Generation>> = lock(&self.generations).values().cloned().collect();
        loaded.sort_by(|a, b| b.name.cmp(&a.name));
        for generation in loaded {
            if !self.is_disabled(&generation.name) && self.hook(&generation, false).await.is_ok() {
                self.services.registry.mark_stopped(&generation.name);
            }
        }
    }

    fn is_disabled(&self, name: &str) -> bool {
        lock(&self.disabled).contains(name)
    }

    fn set_enabled(&self, name: &str, enable: bool) {
        let mut disabled = self
            .disabled
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if enable {
            disabled.remove(name);
        } else {
            disabled.insert(name.to_owned());
        }
    }

    /// A permit for a request: when none is left the request gets 503 at once, not a queue.
    fn permit_now(&self) -> Result<SemaphorePermit<'_>, CallError> {
        self.permits
            .try_acquire()
            .map_err(|_| CallError::new(503, "too many adapter requests at once; try again".into()))
    }

    /// A permit for background work (jobs, hooks, a component's tools at load), which waits
    /// its turn.
    async fn permit(&self) -> SemaphorePermit<'_> {
        self.permits
            .acquire()
            .await
            .expect("the instance semaphore is never closed")
    }

    /// Registers the tools a component offers (`tool-provider`), replacing its previous ones.
    async fn register_tools(&self, generation: &Arc<Generation>) {
        let name = generation.name.clone();
        self.unregister_tools(&name);
        let Some(indices) = &generation.exports.tools else {
            return;
        };
        let limit = generation.caller.effective.limits.handle_http();
        let permit = self.permit().await;
        let Ok(specs) = self
            .call(permit, generation, limit, async |store, instance, _| {
                indices
                    .load(&mut *store, instance)?
                    .call_list_tools(&mut *store)
                    .await
            })
            .await
        else {
            return;
        };
        let mut owned = Vec::new();
        for spec in specs {
            let parameters = match serde_json::from_str(&spec.parameters_json) {
                Ok(parameters) => parameters,
                Err(e) => {
                    self.services.registry.mark_error(
                        &name,
                        "ToolError",
                        &format!("tool {}: parameters are not JSON: {e}", spec.name),
                    );
                    continue;
                }
            };
            let (host, adapter, tool) = (self.this.clone(), name.clone(), spec.name.clone());
            let handler = move |input: serde_json::Value, _| {
                let (host, adapter, tool) = (host.clone(), adapter.clone(), tool.clone());
                async move {
                    let host = host.upgrade().ok_or("the adapter host is gone")?;
                    host.call_tool(&adapter, &tool, input.to_string()).await
                }
            };
            let registered = Tool::new(&spec.name, &spec.description, parameters, handler);
            match self.services.tools.register(registered, false) {
                Ok(()) => owned.push(spec.name),
                Err(e) => self
                    .services
                    .registry
                    .mark_error(&name, "ToolError", &e.to_string()),
            }
        }
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, owned);
    }

    fn unregister_tools(&self, adapter: &str) {
        let owned = self
            .tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(adapter);
        for tool in owned.into_iter().flatten() {
            self.services.tools.unregister(&tool);
        }
    }

    /// Calls a component tool in a fresh instance (sandboxed like any other call).
    async fn call_tool(&self, adapter: &str, tool: &str, args: String) -> Result<String, String> {
        let generation = self
            .generation(adapter)
            .ok_or_else(|| format!("adapter {adapter:?} is not loaded"))?;
        let Some(indices) = &generation.exports.tools else {
            return Err(format!("adapter {adapter:?} no longer offers tools"));
        };
        let limit = generation.caller.effective.limits.handle_http();
        // Not waiting: the caller may itself be a component call holding a permit.
        let permit = self.permit_now().map_err(|e| e.message)?;
        self.call(permit, &generation, limit, async |store, instance, _| {
            indices
                .load(&mut *store, instance)?
                .call_call_tool(&mut *store, tool, &args)
                .await
        })
        .await
        .map_err(|e| e.message)?
    }

    /// Unloads an adapter (its file was removed): its tools, its `stop`, and its entry, also
    /// one that only said why the file never loaded.
    pub async fn unload(&self, name: &str) {
        let _lifecycle = self.lifecycle.lock().await;
        self.unregister_tools(name);
        let removed = self
            .generations
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        if let Some(generation) = removed {
            if !self.is_disabled(name) {
                let _ = self.hook(&generation, false).await;
            }
            tracing::info!(adapter = %name, "component unloaded");
        }
        let registry = &self.services.registry;
        if registry
            .get(name)
            .is_some_and(|e| e.kind == AdapterKind::Wasm)
        {
            registry.remove(name);
        }
    }

    /// A load failure: the last good generation keeps serving; the entry shows the error.
    fn record_failure(&self, name: &str, error: &anyhow::Error) {
        let registry = &self.services.registry;
        if registry.get(name).is_none() {
            registry.insert(AdapterEntry::new(name, AdapterKind::Wasm));
        }
        tracing::warn!(adapter = %name, "cannot load component: {error:#}");
        registry.mark_error(name, "LoadError", &format!("{error:#}"));
    }

    /// Loads bundled components and every `*.wasm` in the adapters folder, sorted by name; a
    /// file overrides the bundled component of the same name.
    pub async fn discover(&self) {
        let files = self.scan();
        let mut names: Vec<&String> = files
            .iter()
            .filter(|(_, f)| f.wasm.is_some())
            .map(|(name, _)| name)
            .collect();
        let bundled: Vec<String> = self.bundled.iter().map(|b| b.name.to_owned()).collect();
        names.extend(&bundled);
        names.sort();
        names.dedup();
        for name in names {
            if let Err(e) = self.reload(name, files.get(name)).await {
                self.record_failure(name, &e);
            }
        }
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = files;
    }

    fn bundled(&self, name: &str) -> Option<&'static Bundled> {
        self.bundled.iter().find(|b| b.name == name)
    }

    /// The bundled component's bytes, or why this binary has none.
    fn bundled_bytes(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        match self.bundled(name).map(|b| b.wasm) {
            Some(Some(wasm)) => Ok(wasm.to_vec()),
            Some(None) => Err(anyhow::anyhow!(NOT_BUILT)),
            None => Err(anyhow::anyhow!("no bundled component named {name:?}")),
        }
    }

    /// Loads an adapter from its file, else its bundled component, and installs it unless
    /// the same component under the same grant already serves.
    async fn reload(&self, name: &str, files: Option<&Files>) -> anyhow::Result<()> {
        let bytes = match files.and_then(|f| f.wasm.as_ref()) {
            Some((path, _)) => std::fs::read(path)?,
            None => self.bundled_bytes(name)?,
        };
        let generation = self.load(name, bytes).await?;
        match self.generation(name) {
            // The same component under the same grant: it keeps serving, and the entry no
            // longer shows a failure of the file in between.
            Some(current)
                if current.sha256 == generation.sha256
                    && current.caller.effective == generation.caller.effective =>
            {
                self.publish(&current);
            }
            _ => self.install(generation).await,
        }
        Ok(())
    }

    /// The adapters folder by adapter name: its component and its grant file.
    fn scan(&self) -> BTreeMap<String, Files> {
        let mut found: BTreeMap<String, Files> = BTreeMap::new();
        for entry in std::fs::read_dir(&self.adapters_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            let (Some(name), Some(extension), Ok(meta)) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|e| e.to_str()),
                entry.metadata(),
            ) else {
                continue;
            };
            let stamp = (
                meta.len(),
                meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            );
            let files = match extension {
                "wasm" | "toml" => found.entry(name.to_owned()).or_default(),
                _ => continue,
            };
            if extension == "wasm" {
                files.wasm = Some((path, stamp));
            } else {
                files.grant = Some(stamp);
            }
        }
        found
    }

    /// One hot-reload pass (off the request path): a new or changed component or grant file
    /// (re)loads its adapter; a removed component unloads it, or brings back the bundled
    /// component of that name. A file that fails to load is tried again once it changes (a
    /// file still being written fails now and loads when it is complete).
    pub async fn reload_changed(&self) {
        let files = self.scan();
        let before = std::mem::replace(
            &mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner),
            files.clone(),
        );
        let names: BTreeSet<&String> = before.keys().chain(files.keys()).collect();
        for name in names {
            let (old, new) = (before.get(name), files.get(name));
            if old == new {
                continue;
            }
            let had_wasm = old.is_some_and(|f| f.wasm.is_some());
            let has_wasm = new.is_some_and(|f| f.wasm.is_some());
            if has_wasm || self.bundled(name).is_some() {
                if let Err(e) = self.reload(name, new).await {
                    if had_wasm && !has_wasm {
                        // The file is gone and nothing replaces it.
                        self.unload(name).await;
                    }
                    self.record_failure(name, &e);
                }
            } else if had_wasm {
                self.unload(name).await;
            }
        }
    }

    /// Answers a request to `/api/adapters/<name>/...`.
    pub async fn handle_http(
        &self,
        name: &str,
        request: HttpRequest,
    ) -> Result<HttpResponse, CallError> {
        let Some(generation) = self.generation(name) else {
            return Err(self.not_loaded(name));
        };
        if self.is_disabled(name) {
            return Err(CallError::new(503, format!("adapter {name:?} is disabled")));
        }
        let limit = generation.caller.effective.limits.handle_http();
        let permit = self.permit_now()?;
        let response = self
            .call(
                permit,
                &generation,
                limit,
                async |store, instance, exports| {
                    exports
                        .handler
                        .load(&mut *store, instance)?
                        .call_handle_http(&mut *store, &request)
                        .await
                },
            )
            .await?;
        // Activity is what the adapter handled, not what it turned away (an unsigned request).
        if response.status < 400 {
            self.services.registry.touch(name);
        }
        Ok(response)
    }

    /// Why there is no generation to call: a component that failed to load (or a bundled one
    /// this binary was built without) is not installed, 503; an unknown name is 404.
    fn not_loaded(&self, name: &str) -> CallError {
        match self.services.registry.get(name) {
            Some(entry) if entry.kind == AdapterKind::Wasm => CallError {
                status: 503,
                message: format!(
                    "the {name} adapter is not installed: {}",
                    entry
                        .error_message
                        .as_deref()
                        .unwrap_or("its component is not loaded")
                ),
                public: format!(
                    "the {name} adapter is not installed; its entry in /api/adapters says why"
                ),
            },
            _ => CallError::new(404, format!("no adapter named {name:?}")),
        }
    }

    /// Runs a job's payload in a fresh instance of the adapter that enqueued it; agent runs
    /// it starts report to the job's task. A job waits for a free instance.
    pub async fn run_job(&self, name: &str, task_id: &str, payload: Vec<u8>) -> Result<(), String> {
        let generation = self
            .generation(name)
            .ok_or_else(|| format!("adapter {name:?} is not loaded"))?;
        let limit = generation.caller.effective.limits.run_job();
        let permit = self.permit().await;
        self.call(
            permit,
            &generation,
            limit,
            async |store, instance, exports| {
                store.data_mut().job_task = Some(task_id.to_owned());
                exports
                    .handler
                    .load(&mut *store, instance)?
                    .call_run_job(&mut *store, &payload)
                    .await
            },
        )
        .await
        .map_err(|e| e.message)?
    }

    /// One call in a fresh store, holding an instance permit: the deadline as epochs and as a
    /// timer (a guest blocked in a host call does not see epochs), memory limits, and any
    /// failure recorded on the adapter's entry.
    async fn call<T>(
        &self,
        _permit: SemaphorePermit<'_>,
        generation: &Generation,
        limit: Duration,
        f: impl AsyncFnOnce(
            &mut Store<HostState>,
            &wasmtime::component::Instance,
            &Exports,
        ) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let name = &generation.name;
        let memory = generation
            .caller
            .effective
            .limits
            .memory_bytes()
            .min(engine::MAX_MEMORY);
        let (mut store, stderr) = self.store(Arc::clone(&generation.caller), memory, limit);
        let cancel = store.data().cancel.clone();
        let _cancel_runs_on_drop = cancel.drop_guard();
        let run = async {
            let instance = generation.pre.instantiate_async(&mut store).await?;
            f(&mut store, &instance, &generation.exports).await
        };
        let outcome = tokio::time::timeout(limit + Duration::from_millis(250), run).await;
        let (kind, status, message) = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => classify(&e, &stderr),
            Err(_) => ("Timeout", 503, format!("no answer within {limit:?}")),
        };
        self.services.registry.mark_error(name, kind, &message);
        Err(CallError {
            status,
            message: format!("adapter {name:?} failed: {kind}: {message}"),
            public: format!(
                "adapter {name:?} failed ({kind}); its entry in /api/adapters has the details"
            ),
        })
    }

    /// Runs the adapter's `start` or `stop` export and, when it succeeds, takes the adapter
    /// into or out of service. The caller persists the choice.
    pub async fn toggle(&self, name: &str, enable: bool) -> Result<(), CallError> {
        let _lifecycle = self.lifecycle.lock().await;
        let generation = self
            .generation(name)
            .ok_or_else(|| CallError::new(404, format!("no adapter named {name:?}")))?;
        if generation.exports.lifecycle.is_none() {
            return Err(CallError::new(
                409,
                format!("adapter {name:?} cannot be enabled or disabled: it has no start and stop"),
            ));
        }
        let registry = &self.services.registry;
        let running = registry
            .get(name)
            .is_some_and(|e| e.status == AdapterStatus::Running);
        // Already so: no hook runs twice. (An adapter in error may be enabled again.)
        if (enable && running && !self.is_disabled(name)) || (!enable && self.is_disabled(name)) {
            return Ok(());
        }
        // A hook that fails, traps or times out leaves the adapter as it was.
        self.hook(&generation, enable)
            .await
            .map_err(|e| CallError {
                status: 500,
                public: e.message.clone(),
                ..e
            })?;
        self.set_enabled(name, enable);
        if enable {
            registry.mark_running(name);
            if let Some(unset) = self.unset_secrets(&generation) {
                registry.mark_error(name, "ConfigError", &unset);
            }
        } else {
            registry.mark_stopped_because(name, "disabled from the dashboard");
        }
        Ok(())
    }

    /// Marks adapters disabled before discovery (the persisted dashboard choice).
    pub fn set_disabled(&self, names: impl IntoIterator<Item = String>) {
        self.disabled
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(names);
    }
}

/// Names a failed call: the trap, with what the guest last wrote to stderr (a panic message
/// or an allocation failure) when it wrote anything.
fn classify(error: &wasmtime::Error, stderr: &MemoryOutputPipe) -> (&'static str, u16, String) {
    let guest = String::from_utf8_lossy(&stderr.contents()).into_owned();
    let text = trap_text(error, &guest);
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => ("Timeout", 503, text),
        _ if guest.contains("memory allocation") || text.contains("growing memory") => {
            ("MemoryLimit", 500, text)
        }
        _ if guest.contains("panicked at") => ("Panic", 500, text),
        Some(_) => ("Trap", 500, text),
        None => ("HostError", 500, text),
    }
}

fn trap_text(error: &wasmtime::Error, guest_stderr: &str) -> String {
    // The last few meaningful lines; the standard "run with RUST_BACKTRACE" hint says nothing.
    let lines: Vec<&str> = guest_stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" ");
    if tail.is_empty() {
        format!("{error:#}")
    } else {
        format!("{error:#} ({tail})")
    }
}
