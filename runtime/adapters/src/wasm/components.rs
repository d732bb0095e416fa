//! The components of the running server: which generation of each serves (bundled ones and
//! the files of `<data_dir>/adapters/`), hot reload, their tools, and their jobs. Their
//! lifecycle is the supervisor's.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;

use super::cache;
use super::folder::{self, Files};
use super::generation::{CODE, Generation, OPTIMIZED};
use super::grants::Grant;
use super::loader::{Loader, Named};
use super::loading;
use super::sandbox::AdapterPlace;
use super::shadow::Shadow;
use super::tool_bridge::ToolBridge;
use crate::adapters::{Managed, Supervisor};
use crate::shadows;

/// The registry metadata key that names an adapter's shadow build.
const SHADOW: &str = "shadow";

/// The components a start found to load.
pub struct Found {
    files: BTreeMap<String, Files>,
    names: BTreeSet<String>,
}

/// Whether a reload installs a generation the same as the one serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fresh {
    /// Only a changed component or grant is installed.
    IfChanged,
    /// Installed regardless: it starts anew (its settings changed).
    Always,
}

pub struct Components {
    loader: Arc<Loader>,
    /// One optimizing compile at a time, behind the baseline code that serves meanwhile.
    optimizing: Arc<tokio::sync::Semaphore>,
    supervisor: Arc<Supervisor>,
    tools: ToolBridge,
    /// What the last scan saw of each adapter's files; a file that failed to load stays here,
    /// so it is tried again only once it changes.
    seen: Mutex<BTreeMap<String, Files>>,
}

impl Components {
    pub fn new(loader: Loader, supervisor: Arc<Supervisor>, tools: ToolBridge) -> Self {
        Self {
            loader: Arc::new(loader),
            optimizing: Arc::new(tokio::sync::Semaphore::new(1)),
            supervisor,
            tools,
            seen: Mutex::default(),
        }
    }

    pub fn loader(&self) -> &Loader {
        &self.loader
    }

    /// The generation serving `name`.
    pub fn generation(&self, name: &str) -> Option<Arc<Generation>> {
        self.supervisor.runner::<Generation>(name)
    }

    /// The generation serving `name` and a place among its instances for a job, when it
    /// serves (installed, not off) and has one free now within its background share.
    pub(crate) fn job_place(&self, name: &str) -> Option<(Arc<Generation>, AdapterPlace)> {
        if !self.supervisor.is_serving(name) {
            return None;
        }
        let generation = self.generation(name)?;
        let place = generation.free_place()?;
        Some((generation, place))
    }

    /// Checks a component from a file named `file` (without `.wasm`) against `grant` (or the
    /// grant on disk) without installing it.
    pub async fn check(
        &self,
        file: &str,
        bytes: Vec<u8>,
        grant: Option<Grant>,
    ) -> anyhow::Result<Generation> {
        self.loader.load(Named::Own { file }, bytes, grant).await
    }

    /// A generation of adapter `name` to replay a recording with: `bytes` (a new build), else
    /// its installed component, else the bundled one; under the adapter's grant (its limits,
    /// the secrets it may read) with its calls taped, so the recording answers them. Never
    /// installed.
    pub async fn for_replay(
        &self,
        name: &str,
        bytes: Option<Vec<u8>>,
    ) -> anyhow::Result<Generation> {
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => {
                let file = self.loader.adapters_dir().join(format!("{name}.wasm"));
                match std::fs::read(&file) {
                    Ok(bytes) => bytes,
                    Err(_) => self.loader.bundled_bytes(name)?,
                }
            }
        };
        let mut grant = self.loader.grant_for(name, Some(&bytes))?;
        grant.record = super::grants::Record::All;
        self.check(name, bytes, Some(grant)).await
    }

    /// Serves `generation`: its tools, then the supervisor's lifecycle; baseline code is
    /// optimized behind it.
    pub async fn install(&self, generation: Generation) {
        let generation = Arc::new(generation);
        tracing::info!(adapter = %generation.name, version = %generation.version, sha256 = %&generation.sha256[..12], optimized = generation.is_optimized(), "component loaded");
        self.tools.register(&generation).await;
        self.supervisor.install(Arc::clone(&generation) as _).await;
        let supervisor = Arc::clone(&self.supervisor);
        self.optimize_behind(&generation, move |generation| {
            // The entry says so, unless another generation serves under the name by now.
            let name = &generation.name;
            if supervisor
                .runner::<Generation>(name)
                .is_some_and(|serving| Arc::ptr_eq(&serving, generation))
            {
                supervisor.registry().set_metadata(name, CODE, OPTIMIZED);
            }
        });
    }

    /// Compiles a baseline generation's optimized code in the background, one at a time;
    /// `then` once it runs it.
    fn optimize_behind(
        &self,
        generation: &Arc<Generation>,
        then: impl FnOnce(&Arc<Generation>) + Send + 'static,
    ) {
        if generation.is_optimized() {
            return;
        }
        let (loader, turn) = (Arc::clone(&self.loader), Arc::clone(&self.optimizing));
        let generation = Arc::clone(generation);
        tokio::spawn(async move {
            let _turn = turn.acquire().await;
            match loader.optimize(&generation).await {
                Ok(()) => then(&generation),
                // It keeps running its baseline code.
                Err(e) => {
                    tracing::warn!(adapter = %generation.name, "cannot optimize the component: {e:#}");
                }
            }
        });
    }

    /// Runs `<name>.shadow.wasm` (in `files`) beside the generation serving `name`, or stops
    /// running one when there is none.
    async fn reshadow(&self, name: &str, files: Option<&Files>) {
        let Some(live) = self.generation(name) else {
            return;
        };
        let shadow = match files.and_then(|f| f.shadow.as_ref()) {
            None => None,
            Some((path, _)) => match self.shadow_from(name, files, path).await {
                Ok(shadow) => Some(shadow),
                Err(e) => {
                    tracing::warn!(adapter = %name, "cannot load its shadow build: {e:#}");
                    let said = format!("cannot load: {e:#}");
                    self.supervisor.registry().set_metadata(name, SHADOW, &said);
                    return;
                }
            },
        };
        self.attach(&live, shadow);
    }

    async fn shadow_from(
        &self,
        name: &str,
        files: Option<&Files>,
        path: &std::path::Path,
    ) -> anyhow::Result<Arc<Shadow>> {
        let bytes = std::fs::read(path)?;
        // The serving component's bytes say whether the bundled grant is its.
        let live = files
            .and_then(|f| f.wasm.as_ref())
            .map(|(path, _)| std::fs::read(path))
            .transpose()?;
        let grant = self.loader.grant_for(name, live.as_deref())?;
        self.load_shadow(name, bytes, grant).await
    }

    /// Loads `bytes` as a shadow build of adapter `name` under its `grant`, with its calls
    /// taped (the live call's recording answers them), and starts its counts.
    async fn load_shadow(
        &self,
        name: &str,
        bytes: Vec<u8>,
        mut grant: Grant,
    ) -> anyhow::Result<Arc<Shadow>> {
        grant.record = super::grants::Record::All;
        let generation = self
            .loader
            .load(Named::Shadow(name), bytes, Some(grant))
            .await?;
        let (adapter, version, sha256) = (
            name.to_owned(),
            generation.version.clone(),
            generation.sha256.clone(),
        );
        self.loader
            .services()
            .db
            .call(move |conn| shadows::begin(conn, &adapter, &version, &sha256))
            .await?;
        Ok(Shadow::start(generation))
    }

    /// Runs `shadow` beside `live` from its next call (none: stops running one); its registry
    /// entry says so.
    fn attach(&self, live: &Generation, shadow: Option<Arc<Shadow>>) {
        let (name, registry) = (&live.name, self.supervisor.registry());
        match &shadow {
            Some(shadow) => {
                let generation = &shadow.generation;
                tracing::info!(adapter = %name, version = %generation.version, sha256 = %&generation.sha256[..12], "shadow build loaded: it runs beside the serving one");
                let percent = live.prepared().caller.granted.limits.shadow_percent;
                let said = format!(
                    "{} ({}…) on {percent}% of calls",
                    generation.version,
                    &generation.sha256[..12]
                );
                registry.set_metadata(name, SHADOW, &said);
                self.optimize_behind(generation, |_| {});
            }
            None => registry.remove_metadata(name, SHADOW),
        }
        *live
            .prepared()
            .caller
            .shadow
            .write()
            .unwrap_or_else(PoisonError::into_inner) = shadow;
    }

    /// Runs `bytes` as a shadow build beside `live` (a generation loaded by hand, as a bench
    /// does; the server's come from the adapters folder), under `grant`, once its optimized
    /// code is compiled.
    pub async fn shadow(
        &self,
        live: &Generation,
        bytes: Vec<u8>,
        grant: Grant,
    ) -> anyhow::Result<()> {
        let shadow = self.load_shadow(&live.name, bytes, grant).await?;
        self.loader.optimize(&shadow.generation).await?;
        self.attach(live, Some(shadow));
        Ok(())
    }

    /// The components to load: bundled ones and every `*.wasm` in the adapters folder. Each
    /// shows as loading from now on, so its routes answer 503 (not 404) until it is ready.
    pub fn announce(&self) -> Found {
        let files = folder::scan(self.loader.adapters_dir());
        let names: BTreeSet<String> = files
            .iter()
            .filter(|(_, f)| f.wasm.is_some())
            .map(|(name, _)| name.clone())
            .chain(self.loader.bundled_names().map(str::to_owned))
            .collect();
        for name in &names {
            loading::loading(&self.supervisor, name);
        }
        Found { files, names }
    }

    /// Loads what [`Components::announce`] found, sorted by name (a file overrides the bundled
    /// component of the same name).
    pub async fn discover(&self, Found { files, names }: Found) {
        for name in &names {
            if let Err(e) = self.reload(name, files.get(name), Fresh::IfChanged).await {
                loading::load_failed(&self.supervisor, name, &format!("{e:#}"));
            }
        }
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = files;
        self.prune_cache();
    }

    /// Settings were written: every adapter that reads one of `changed` takes it now. Natives
    /// start anew; components are loaded again, so their grant's origins and secrets are
    /// resolved anew, and start anew (their tools listed again). Returns the adapters that
    /// did.
    pub fn settings_changed<'a>(
        &'a self,
        changed: &'a BTreeSet<String>,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            if changed.is_empty() {
                return Vec::new();
            }
            let mut applied = self.supervisor.restart_natives_reading(changed).await;
            let files = self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for generation in self.supervisor.runners::<Generation>() {
                if !generation.settings().iter().any(|s| changed.contains(s)) {
                    continue;
                }
                let name = &generation.name;
                match self.reload(name, files.get(name), Fresh::Always).await {
                    Ok(()) => applied.push(name.clone()),
                    Err(e) => loading::load_failed(&self.supervisor, name, &format!("{e:#}")),
                }
            }
            applied.sort();
            applied
        })
    }

    /// Loads an adapter from its file, else its bundled component, and installs it unless
    /// the same component under the same grant already serves (and `fresh` allows that).
    async fn reload(&self, name: &str, files: Option<&Files>, fresh: Fresh) -> anyhow::Result<()> {
        let bytes = match files.and_then(|f| f.wasm.as_ref()) {
            Some((path, _)) => std::fs::read(path)?,
            None => self.loader.bundled_bytes(name)?,
        };
        let generation = self.loader.load(Named::File(name), bytes, None).await?;
        match self.generation(name) {
            // The same component under the same grant keeps serving; only the entry no longer
            // shows a failure of the file in between.
            Some(current) if fresh == Fresh::IfChanged && current.same_as(&generation) => {
                self.supervisor.refresh(name);
            }
            _ => self.install(generation).await,
        }
        self.reshadow(name, files).await;
        Ok(())
    }

    /// One hot-reload pass (off the request path) over `files`, the folder as it is now: a
    /// new or changed component or grant file (re)loads its adapter; a removed component
    /// unloads it, or brings back the bundled component of that name. The `unfinished`
    /// adapters (a file still being written) count as unchanged until a later pass. A file
    /// that fails to load is tried again once it changes.
    pub(crate) async fn reload_changed(
        &self,
        mut files: BTreeMap<String, Files>,
        unfinished: &BTreeSet<String>,
    ) {
        self.announce_new(&files);
        let before = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            for name in unfinished {
                match seen.get(name) {
                    Some(old) => files.insert(name.clone(), old.clone()),
                    None => files.remove(name),
                };
            }
            std::mem::replace(&mut *seen, files.clone())
        };
        let names: BTreeSet<&String> = before.keys().chain(files.keys()).collect();
        let mut changed = false;
        for name in names {
            let (old, new) = (before.get(name), files.get(name));
            if old == new {
                continue;
            }
            changed = true;
            let had_wasm = old.is_some_and(|f| f.wasm.is_some());
            let has_wasm = new.is_some_and(|f| f.wasm.is_some());
            if has_wasm || self.loader.bundled(name).is_some() {
                if let Err(e) = self.reload(name, new, Fresh::IfChanged).await {
                    if had_wasm && !has_wasm {
                        // The file is gone and nothing replaces it.
                        self.unload(name).await;
                    }
                    loading::load_failed(&self.supervisor, name, &format!("{e:#}"));
                }
            } else if had_wasm {
                self.unload(name).await;
            }
        }
        if changed {
            self.prune_cache();
        }
    }

    /// A component that appeared in the folder (complete, or still being copied) and that no
    /// entry knows shows as loading at once, so its routes answer 503, not 404, while it is
    /// written and compiled (a big one takes seconds).
    fn announce_new(&self, files: &BTreeMap<String, Files>) {
        for (name, _) in files.iter().filter(|(_, f)| f.wasm.is_some()) {
            if self.supervisor.registry().get(name).is_none() {
                loading::loading(&self.supervisor, name);
                tracing::info!(adapter = %name, "component found in the adapters folder; loading");
            }
        }
    }

    /// Unloads an adapter (its file was removed): its tools, its `stop`, its entry.
    pub(crate) async fn unload(&self, name: &str) {
        self.tools.unregister(name);
        self.supervisor.remove(name).await;
        tracing::info!(adapter = %name, "component unloaded");
    }

    /// Keeps the compile cache to the components in use.
    fn prune_cache(&self) {
        let keep: HashSet<String> = self
            .supervisor
            .runners::<Generation>()
            .iter()
            .map(|g| g.sha256.clone())
            .collect();
        cache::prune(self.loader.cache_dir(), &keep);
    }
}
