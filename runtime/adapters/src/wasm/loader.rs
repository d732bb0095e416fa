//! Turning bytes into a loaded [`Generation`]: compile (or reuse the compile cache), check the
//! imports against the contract versions this host speaks, call `describe`, check the name,
//! routes and metadata it gives, and meet its request with the operator's grant.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use service_contract::registry::clip;
use service_contract::routes;
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre};

use super::bundled::{Bundled, NOT_BUILT};
use super::cache;
use super::caps::{self, Granted, INTERFACES};
use super::exports::{Describe, Description, Exports, SUPPORTED, Version};
use super::generation::{Generation, Serves, Unoptimized};
use super::grants::{Grant, Request};
use super::sandbox::{Prepared, Sandbox, Wait};
use super::state::{Caller, HostState, Services};
use crate::adapters::CallError;

/// `describe` must answer at once; the margin is for a big guest's first call (an
/// interpreter's first steps) on a loaded machine, where a computing guest runs last.
const DESCRIBE_LIMIT: Duration = Duration::from_secs(5);
const PACKAGE: &str = "service:adapter/";
/// What a standard `wasi:http/proxy` component exports (any 0.2.x).
const INCOMING_HANDLER: &str = "wasi:http/incoming-handler@0.2.";
/// Bounds on what `describe` may say.
pub(crate) const MAX_NAME_CHARS: usize = 64;
pub(crate) const MAX_VERSION_CHARS: usize = 64;
pub(crate) const MAX_METADATA: usize = 32;
pub(crate) const MAX_METADATA_VALUE_CHARS: usize = 512;
pub(crate) const MAX_REQUIRED_SECRETS: usize = 32;

pub struct Loader {
    sandbox: Arc<Sandbox>,
    services: Arc<Services>,
    cache_dir: PathBuf,
    adapters_dir: PathBuf,
    /// `[adapters.<name>]` of config.toml (a grant file beside the component wins).
    config_grants: BTreeMap<String, toml::Table>,
    bundled: &'static [Bundled],
    /// Names of native adapters, which no component may take.
    reserved: Vec<String>,
}

impl Loader {
    pub fn new(
        sandbox: Arc<Sandbox>,
        services: Arc<Services>,
        data_dir: &std::path::Path,
        config_grants: BTreeMap<String, toml::Table>,
        bundled: &'static [Bundled],
        reserved: Vec<String>,
    ) -> Self {
        Self {
            sandbox,
            services,
            cache_dir: data_dir.join("cache"),
            adapters_dir: data_dir.join("adapters"),
            config_grants,
            bundled,
            reserved,
        }
    }

    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    pub fn adapters_dir(&self) -> &std::path::Path {
        &self.adapters_dir
    }

    pub(crate) fn cache_dir(&self) -> &std::path::Path {
        &self.cache_dir
    }

    pub fn bundled(&self, name: &str) -> Option<&'static Bundled> {
        self.bundled.iter().find(|b| b.name == name)
    }

    pub(crate) fn bundled_names(&self) -> impl Iterator<Item = &'static str> {
        self.bundled.iter().map(|b| b.name)
    }

    /// The bundled component's bytes, or why this binary has none.
    pub(crate) fn bundled_bytes(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        match self.bundled(name).map(|b| b.wasm) {
            Some(Some(wasm)) => Ok(wasm.to_vec()),
            Some(None) => Err(anyhow::anyhow!(NOT_BUILT)),
            None => Err(anyhow::anyhow!("no bundled component named {name:?}")),
        }
    }

    /// Names of the native adapters, which no component may take.
    pub fn native_names(&self) -> &[String] {
        &self.reserved
    }

    /// Where the grant of adapter `name` comes from: its TOML file, else config.toml, else
    /// the bundled default, which goes to the bundled component alone: `file`, the bytes of a
    /// file taking its name, gets it only when it is that very component (a stranger named
    /// `teamchat.wasm` must not inherit teamchat's secrets).
    pub fn grant_source(&self, name: &str, file: Option<&[u8]>) -> GrantSource {
        let path = self.adapters_dir.join(format!("{name}.toml"));
        if path.exists() {
            return GrantSource::File(path);
        }
        if self.config_grants.contains_key(name) {
            return GrantSource::Config;
        }
        match self.bundled(name) {
            Some(bundled) if file.is_none_or(|bytes| bundled.wasm == Some(bytes)) => {
                GrantSource::Bundled(bundled.grant)
            }
            Some(_) => GrantSource::NotTheBundled,
            None => GrantSource::Nothing,
        }
    }

    /// The grant of an adapter, from where [`Loader::grant_source`] says.
    pub(crate) fn grant_for(&self, name: &str, file: Option<&[u8]>) -> anyhow::Result<Grant> {
        match self.grant_source(name, file) {
            GrantSource::File(path) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                Grant::parse(&text)
                    .map_err(|e| anyhow::anyhow!("invalid grant {}: {e}", path.display()))
            }
            GrantSource::Config => Grant::from_table(self.config_grants[name].clone())
                .map_err(|e| anyhow::anyhow!("invalid [adapters.{name}] in config.toml: {e}")),
            GrantSource::Bundled(text) => Grant::parse(text).map_err(anyhow::Error::msg),
            GrantSource::Nothing | GrantSource::NotTheBundled => Ok(Grant::default()),
        }
    }

    /// Compiles, checks and describes a component without installing it, under the name
    /// `named` says; `grant`, when given, is used instead of the grant on disk (`adapters
    /// install` checks before copying).
    pub async fn load(
        &self,
        named: Named<'_>,
        bytes: Vec<u8>,
        grant: Option<Grant>,
    ) -> anyhow::Result<Generation> {
        // Without optimized code in the cache, the baseline compiler's serves first.
        let optimized = self.sandbox.flavor(bytes.len());
        let sha256 = cache::sha256_hex(&bytes);
        let baseline = !cache::is_cached(optimized.engine(), &self.cache_dir, &sha256);
        let flavor = if baseline {
            self.sandbox.baseline()
        } else {
            optimized
        };
        let (engine, cache_dir) = (flavor.engine().clone(), self.cache_dir.clone());
        // The bytes come back: whether they are a bundled component decides its grant.
        let (compiled, bytes) = tokio::task::spawn_blocking(move || {
            (cache::compile(&engine, &cache_dir, &bytes, sha256), bytes)
        })
        .await?;
        let compiled = compiled?;
        let (version, imports) = contract_of(flavor.engine(), &compiled.component)?;
        let pre = flavor
            .linker()
            .instantiate_pre(&compiled.component)
            .map_err(|e| anyhow::anyhow!("cannot link: {e:#}"))?;
        let exports = Exports::find(&pre, version)?;

        let (name, description) = match version {
            // It has no describe: it is named by its file and serves every path.
            Version::Proxy => (self.check_name(None, named.file())?, Description::proxy()),
            _ => {
                let description = self.describe(named, &pre, &exports).await?;
                let expected = match named {
                    Named::File(file) | Named::Shadow(file) => Some(file),
                    Named::Own { .. } => None,
                };
                (self.check_name(expected, &description.name)?, description)
            }
        };
        let description = bounded(description)?;
        let serves = match version {
            Version::Proxy => Serves::Everything,
            _ => Serves::Routes(
                routes::parse_all(
                    description
                        .routes
                        .iter()
                        .map(|(m, p)| (m.as_str(), p.as_str())),
                )
                .map_err(|e| anyhow::anyhow!("{}", e.message))?,
            ),
        };

        let request = Request {
            imports,
            listed: description.listed.clone(),
            required_secrets: description.required_secrets.clone(),
        };
        let grant = match grant {
            Some(grant) => grant,
            None => self.grant_for(&name, Some(&bytes))?,
        };
        let granted = Granted::new(&request, &grant, |name| self.services.env.get(name))
            .map_err(anyhow::Error::msg)?;
        // A 0.1 component asked for what it imports; an import granted nothing is refused.
        // Newer components may import what they never call: a call is refused instead.
        let ungranted = granted.ungranted(&request);
        if version == Version::V0_1 && !ungranted.is_empty() {
            anyhow::bail!(
                "imports {} but was granted nothing of {}; a grant that allows it:\n{}",
                imports_list(&ungranted),
                if ungranted.len() == 1 { "it" } else { "them" },
                granted.suggested_grant(&request)
            );
        }
        let pooled_as = match named {
            Named::Shadow(_) => format!("{name} (shadow)"),
            _ => name.clone(),
        };
        let member = self.sandbox.join(&pooled_as);
        let mut caller = Caller::new(&name, granted, Arc::clone(&self.services), Some(member))?;
        if let Named::Shadow(_) = named {
            caller = caller.into_shadow(pooled_as);
        }
        let caller = Arc::new(caller);
        let unoptimized = baseline.then_some(Unoptimized {
            bytes,
            contract: version,
        });
        Ok(Generation::new(
            name,
            description.version,
            compiled.sha256,
            description.metadata,
            serves,
            request,
            Prepared::new(pre, exports, caller),
            unoptimized,
            Arc::clone(&self.sandbox),
        ))
    }

    /// Compiles a baseline generation's component with the optimizing compiler (into the
    /// cache, where the next load finds it) and has the generation run that code from its
    /// next call. The baseline artifact goes. Nothing to do for optimized code.
    pub async fn optimize(&self, generation: &Generation) -> anyhow::Result<()> {
        let Some(Unoptimized { bytes, contract }) = generation.take_unoptimized() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let flavor = self.sandbox.flavor(bytes.len());
        let (engine, cache_dir) = (flavor.engine().clone(), self.cache_dir.clone());
        let sha256 = generation.sha256.clone();
        let compiled =
            in_background(move || cache::compile(&engine, &cache_dir, &bytes, sha256)).await??;
        let pre = flavor
            .linker()
            .instantiate_pre(&compiled.component)
            .map_err(|e| anyhow::anyhow!("cannot link: {e:#}"))?;
        let exports = Exports::find(&pre, contract)?;
        generation.optimize(pre, exports);
        cache::forget(
            self.sandbox.baseline().engine(),
            &self.cache_dir,
            &generation.sha256,
        );
        tracing::info!(adapter = %generation.name, seconds = started.elapsed().as_secs_f64(), "optimized code serves the component now");
        Ok(())
    }

    /// What `describe` says; it runs with nothing granted.
    async fn describe(
        &self,
        named: Named<'_>,
        pre: &InstancePre<HostState>,
        exports: &Exports,
    ) -> anyhow::Result<Description> {
        let nothing = Arc::new(Caller::new(
            named.file(),
            Granted::default(),
            Arc::clone(&self.services),
            None,
        )?);
        let describing = Arc::new(Prepared::new(pre.clone(), exports.clone(), nothing));
        self.sandbox
            .call(&describing, Describe, DESCRIBE_LIMIT, Wait::Yes)
            .await
            .map_err(|e| match e {
                CallError::Failed(e) => anyhow::anyhow!("describe failed: {e}"),
                CallError::Busy(m) => anyhow::anyhow!("describe could not run: {m}"),
            })
    }

    fn check_name(&self, expected: Option<&str>, name: &str) -> anyhow::Result<String> {
        if let Some(expected) = expected
            && name != expected
        {
            anyhow::bail!(
                "the file is named {expected:?} but the component describes itself as {name:?}"
            );
        }
        check_name(name)?;
        if self.reserved.iter().any(|r| r == name) {
            anyhow::bail!("{name:?} is the name of a native adapter of this server");
        }
        Ok(name.to_owned())
    }
}

/// Runs `work` on a thread of its own at the lowest CPU priority (Linux's nice 19, a
/// thread's own), so the calls served meanwhile go first.
async fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let (done, outcome) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("wasm-optimize".into())
        .spawn(move || {
            // SAFETY: setpriority reads its arguments only; `0` is the calling thread on Linux.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
            let _ = done.send(work());
        })?;
    Ok(outcome.await?)
}

/// The name a component is loaded under.
#[derive(Debug, Clone, Copy)]
pub enum Named<'a> {
    /// Its file's (`<name>.wasm`): a component must describe itself so.
    File(&'a str),
    /// Its own, from `describe` (`adapters install`); a `wasi:http` component, which has
    /// none, takes its file's.
    Own { file: &'a str },
    /// A shadow build of adapter `<name>` (`<name>.shadow.wasm`): it must describe itself
    /// so, and gets instances of its own.
    Shadow(&'a str),
}

impl<'a> Named<'a> {
    fn file(self) -> &'a str {
        match self {
            Self::File(file) | Self::Own { file } | Self::Shadow(file) => file,
        }
    }
}

/// Where an adapter's grant comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSource {
    /// `<data_dir>/adapters/<name>.toml`.
    File(PathBuf),
    /// `[adapters.<name>]` in config.toml.
    Config,
    /// The default grant of the bundled component of that name (its text).
    Bundled(&'static str),
    /// None: the adapter may call only what needs no grant.
    Nothing,
    /// None either: a file taking a bundled component's name, with no grant of its own.
    NotTheBundled,
}

/// An adapter name: up to 64 ASCII letters, digits, `-` and `_` (routes live under
/// `/api/adapters/<name>/`, files are `<name>.wasm`).
pub fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        anyhow::bail!(
            "adapter name {:?} is not valid: up to {MAX_NAME_CHARS} letters, digits, '-' and '_'",
            clip(name, MAX_NAME_CHARS)
        );
    }
    Ok(())
}

/// `service:adapter/kv, service:adapter/agent`.
pub fn imports_list(interfaces: &[&str]) -> String {
    interfaces
        .iter()
        .map(|i| format!("service:adapter/{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses a description larger than the registry keeps.
fn bounded(description: Description) -> anyhow::Result<Description> {
    if description.version.chars().count() > MAX_VERSION_CHARS {
        anyhow::bail!("its version is longer than {MAX_VERSION_CHARS} characters");
    }
    if description.metadata.len() > MAX_METADATA {
        anyhow::bail!(
            "it gives {} metadata entries, more than {MAX_METADATA}",
            description.metadata.len()
        );
    }
    if let Some((key, _)) = description.metadata.iter().find(|(k, v)| {
        k.chars().count() > MAX_NAME_CHARS || v.chars().count() > MAX_METADATA_VALUE_CHARS
    }) {
        anyhow::bail!(
            "metadata {:?} is too long (keys up to {MAX_NAME_CHARS}, values up to {MAX_METADATA_VALUE_CHARS} characters)",
            clip(key, MAX_NAME_CHARS)
        );
    }
    if description.required_secrets.len() > MAX_REQUIRED_SECRETS {
        anyhow::bail!("it requires more than {MAX_REQUIRED_SECRETS} secrets");
    }
    Ok(description)
}

/// The contract version a component was built for (or that it is a standard `wasi:http/proxy`
/// component) and the capabilities it asks for by importing them: the package's interfaces,
/// and standard ones a capability stands behind (`wasi:http/outgoing-handler`). An import of
/// anything else than WASI or this package, of an unknown interface, or of an unknown version
/// is refused with the reason.
fn contract_of(
    engine: &Engine,
    component: &Component,
) -> anyhow::Result<(Version, BTreeSet<String>)> {
    let ty = component.component_type();
    let mut versions = BTreeSet::new();
    let mut imports = BTreeSet::new();
    for (name, _) in ty.imports(engine) {
        if name.starts_with("wasi:") {
            let interface = name
                .split_once('@')
                .map_or(name, |(interface, _)| interface);
            imports.extend(caps::standard(interface).map(str::to_owned));
            continue;
        }
        let Some(rest) = name.strip_prefix(PACKAGE) else {
            anyhow::bail!("imports {name}, which this host does not provide");
        };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        versions.insert(version.to_owned());
        if Version::parse(version).is_some() && !INTERFACES.contains(&interface) {
            anyhow::bail!("imports {name}, which this host does not provide");
        }
        imports.insert(interface.to_owned());
    }
    let mut serves_http = false;
    let mut exports_contract = false;
    for (name, _) in ty.exports(engine) {
        if let Some(rest) = name.strip_prefix(PACKAGE) {
            exports_contract = true;
            versions.insert(rest.split_once('@').map_or("", |(_, v)| v).to_owned());
        }
        serves_http |= name.starts_with(INCOMING_HANDLER);
    }
    let supported = SUPPORTED.join(", @");
    if serves_http && !exports_contract {
        // It may import the contract's 0.2 interfaces (a proxy that runs agents).
        return match versions
            .iter()
            .find(|v| Version::parse(v) != Some(Version::V0_2))
        {
            None => Ok((Version::Proxy, imports)),
            Some(version) => anyhow::bail!(
                "a wasi:http component may import service:adapter@0.2.x interfaces, not @{version}"
            ),
        };
    }
    let mut versions = versions.into_iter();
    let (Some(version), None) = (versions.next(), versions.next()) else {
        anyhow::bail!(
            "it neither exports wasi:http/incoming-handler@0.2.x nor implements exactly one version of service:adapter; this host supports service:adapter@{supported}"
        );
    };
    let parsed = Version::parse(&version).ok_or_else(|| {
        anyhow::anyhow!(
            "built for service:adapter@{version}; this host supports service:adapter@{supported}"
        )
    })?;
    Ok((parsed, imports))
}
