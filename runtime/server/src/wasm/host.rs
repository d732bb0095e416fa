//! The host: loaded adapter generations by name, per-call stores with deadlines and memory
//! limits, discovery of `<data_dir>/adapters/*.wasm`, and hot reload. A failing component
//! only ever affects its own requests and its own registry entry.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use service_contract::{AdapterEntry, AdapterKind, AdapterStatus, Tool};
use tokio::sync::Semaphore;
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

/// `describe` must answer at once.
const DESCRIBE_LIMIT: Duration = Duration::from_secs(1);
/// Host routes that components may not claim.
const RESERVED: &[&str] = &["/enable", "/disable"];

/// One loaded version of an adapter. In-flight calls keep the generation they started on.
pub struct Generation {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub routes: Vec<(String, String)>,
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
    pub message: String,
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
    /// Files seen by the last scan: path → (length, modified).
    seen: std::sync::Mutex<HashMap<PathBuf, (u64, SystemTime)>>,
    disabled: RwLock<HashSet<String>>,
    /// Tools each adapter registered, removed again when it unloads.
    tools: std::sync::Mutex<HashMap<String, Vec<String>>>,
    permits: Semaphore,
    this: std::sync::Weak<WasmHost>,
}

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
            permits: Semaphore::new(engine::MAX_INSTANCES),
        }))
    }

    pub fn pooled(&self) -> bool {
        self.pooled
    }

    pub fn adapters_dir(&self) -> &Path {
        &self.adapters_dir
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
            routes: description
                .routes
                .into_iter()
                .map(|r| (r.method, r.path))
                .collect(),
            metadata: description.metadata,
            pre,
            exports,
            caller,
        }))
    }

    /// Makes `generation` the one that serves its name, and brings its registry entry and its
    /// tools up to date.
    pub async fn install(&self, generation: Arc<Generation>) {
        let registry = &self.services.registry;
        let name = generation.name.clone();
        let mut entry = registry
            .get(&name)
            .unwrap_or_else(|| AdapterEntry::new(&name, AdapterKind::Wasm));
        entry.kind = AdapterKind::Wasm;
        entry.version = Some(generation.version.clone());
        entry.capabilities = generation.caller.effective.summary();
        entry.supports_toggle = generation.exports.lifecycle.is_some();
        entry.metadata = generation.metadata.iter().cloned().collect();
        let disabled = lock(&self.disabled).contains(&name);
        entry.status = if disabled {
            AdapterStatus::Stopped
        } else {
            AdapterStatus::Running
        };
        entry.note = disabled.then(|| "disabled from the dashboard".to_owned());
        registry.insert(entry);
        let unset: Vec<String> = generation
            .caller
            .effective
            .required_secrets
            .iter()
            .filter(|secret| self.services.env.get(secret).is_none())
            .map(|secret| format!("{secret} is not set"))
            .collect();
        if !unset.is_empty() {
            registry.mark_error(&name, "ConfigError", &unset.join("; "));
        }
        tracing::info!(adapter = %name, version = %generation.version, sha256 = %&generation.sha256[..12], "component loaded");
        self.generations
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone(), Arc::clone(&generation));
        self.register_tools(&generation).await;
    }

    /// Registers the tools a component offers (`tool-provider`), replacing its previous ones.
    async fn register_tools(&self, generation: &Arc<Generation>) {
        let name = generation.name.clone();
        self.unregister_tools(&name);
        let Some(indices) = &generation.exports.tools else {
            return;
        };
        let limit = generation.caller.effective.limits.handle_http();
        let Ok(specs) = self
            .call(generation, limit, async |store, instance, _| {
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
        self.call(&generation, limit, async |store, instance, _| {
            indices
                .load(&mut *store, instance)?
                .call_call_tool(&mut *store, tool, &args)
                .await
        })
        .await
        .map_err(|e| e.message)?
    }

    /// Unloads an adapter (its file was removed).
    pub fn unload(&self, name: &str) {
        self.unregister_tools(name);
        if self
            .generations
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .is_some()
        {
            self.services.registry.remove(name);
            tracing::info!(adapter = %name, "component unloaded");
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
        let mut names: Vec<String> = self.bundled.iter().map(|b| b.name.to_owned()).collect();
        names.extend(files.keys().cloned());
        names.sort();
        names.dedup();
        for name in names {
            let bytes = match files.get(&name) {
                Some(path) => std::fs::read(path).map_err(anyhow::Error::from),
                None => self.bundled_bytes(&name),
            };
            self.load_and_install(&name, bytes).await;
        }
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

    async fn load_and_install(&self, name: &str, bytes: anyhow::Result<Vec<u8>>) {
        let loaded = match bytes {
            Ok(bytes) => self.load(name, bytes).await,
            Err(e) => Err(e),
        };
        match loaded {
            Ok(generation) => self.install(generation).await,
            Err(e) => self.record_failure(name, &e),
        }
    }

    /// `*.wasm` files of the adapters folder by name, remembering what was seen.
    fn scan(&self) -> BTreeMap<String, PathBuf> {
        let mut found = BTreeMap::new();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.clear();
        for entry in std::fs::read_dir(&self.adapters_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            let Some(name) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|_| path.extension().is_some_and(|e| e == "wasm"))
            else {
                continue;
            };
            if let Ok(meta) = entry.metadata() {
                seen.insert(
                    path.clone(),
                    (
                        meta.len(),
                        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    ),
                );
            }
            found.insert(name.to_owned(), path);
        }
        found
    }

    /// One hot-reload pass: loads new or changed files (off the request path), unloads
    /// removed ones (falling back to a bundled component of that name).
    pub async fn reload_changed(&self) {
        let before = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let files = self.scan();
        let after = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (name, path) in &files {
            if before.get(path) == after.get(path) {
                continue;
            }
            // A file still being written fails to load now and loads on the next pass.
            let result = match std::fs::read(path) {
                Ok(bytes) => self.load(name, bytes).await,
                Err(e) => Err(e.into()),
            };
            match result {
                Ok(generation)
                    if self
                        .generation(name)
                        .is_some_and(|g| g.sha256 == generation.sha256) => {}
                Ok(generation) => self.install(generation).await,
                Err(e) => {
                    self.seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(path);
                    self.record_failure(name, &e);
                }
            }
        }
        for path in before.keys().filter(|p| !after.contains_key(*p)) {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            match self.bundled(name).map(|_| self.bundled_bytes(name)) {
                Some(Ok(bytes)) => self.load_and_install(name, Ok(bytes)).await,
                Some(Err(e)) => {
                    self.unload(name);
                    self.record_failure(name, &e);
                }
                None => self.unload(name),
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
        if lock(&self.disabled).contains(name) {
            return Err(CallError {
                status: 503,
                message: format!("adapter {name:?} is disabled"),
            });
        }
        let limit = generation.caller.effective.limits.handle_http();
        let response = self
            .call(&generation, limit, async |store, instance, exports| {
                exports
                    .handler
                    .load(&mut *store, instance)?
                    .call_handle_http(&mut *store, &request)
                    .await
            })
            .await?;
        if response.status < 500 {
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
            },
            _ => CallError {
                status: 404,
                message: format!("no adapter named {name:?}"),
            },
        }
    }

    /// Runs a job's payload in a fresh instance of the adapter that enqueued it; agent runs
    /// it starts report to the job's task.
    pub async fn run_job(&self, name: &str, task_id: &str, payload: Vec<u8>) -> Result<(), String> {
        let generation = self
            .generation(name)
            .ok_or_else(|| format!("adapter {name:?} is not loaded"))?;
        let limit = generation.caller.effective.limits.run_job();
        self.call(&generation, limit, async |store, instance, exports| {
            store.data_mut().job_task = Some(task_id.to_owned());
            exports
                .handler
                .load(&mut *store, instance)?
                .call_run_job(&mut *store, &payload)
                .await
        })
        .await
        .map_err(|e| e.message)?
    }

    /// One call in a fresh store: a permit (503 when none is left), the deadline as epochs
    /// and as a timer (a guest blocked in a host call does not see epochs), memory limits,
    /// and any failure recorded on the adapter's entry.
    async fn call<T>(
        &self,
        generation: &Generation,
        limit: Duration,
        f: impl AsyncFnOnce(
            &mut Store<HostState>,
            &wasmtime::component::Instance,
            &Exports,
        ) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let name = &generation.name;
        let _permit = self.permits.try_acquire().map_err(|_| CallError {
            status: 503,
            message: "too many adapter requests at once; try again".into(),
        })?;
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
        })
    }

    /// Runs the adapter's `start` or `stop` export, and remembers the choice.
    pub async fn toggle(&self, name: &str, enable: bool) -> Result<(), CallError> {
        let generation = self.generation(name).ok_or_else(|| CallError {
            status: 404,
            message: format!("no adapter named {name:?}"),
        })?;
        let Some(lifecycle) = &generation.exports.lifecycle else {
            return Err(CallError {
                status: 409,
                message: format!(
                    "adapter {name:?} cannot be enabled or disabled: it has no start and stop"
                ),
            });
        };
        let hook = self
            .call(
                &generation,
                generation.caller.effective.limits.handle_http(),
                async |store, instance, _| {
                    let guest = lifecycle.load(&mut *store, instance)?;
                    if enable {
                        guest.call_start(&mut *store).await
                    } else {
                        guest.call_stop(&mut *store).await
                    }
                },
            )
            .await?;
        let mut disabled = self
            .disabled
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if enable {
            disabled.remove(name);
        } else {
            disabled.insert(name.to_owned());
        }
        drop(disabled);
        let registry = &self.services.registry;
        match hook {
            Ok(()) if enable => registry.mark_running(name),
            Ok(()) => registry.mark_stopped_because(name, "disabled from the dashboard"),
            Err(message) => {
                registry.mark_error(name, "HookError", &message);
                return Err(CallError {
                    status: 500,
                    message,
                });
            }
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

    pub fn names(&self) -> Vec<String> {
        lock(&self.generations).keys().cloned().collect()
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
