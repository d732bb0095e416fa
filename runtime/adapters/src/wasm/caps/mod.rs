//! The host side of each import, one capability per module. A module owns its interface name,
//! its keys of the grant file, how the grant meets the component's request, what the registry
//! lists, its per-adapter state, and its host functions for every published contract version
//! (older versions forward to the newest). The list in [`capabilities!`] below is the one list
//! the loader, the grant parser and the registry read: a new import is its WIT, its module and
//! one line there.

mod agent;
mod filesystem;
mod jobs;
mod kv;
mod log;
mod outbound_http;
mod registry;
mod secrets;
mod tools;

use std::fmt::Debug;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use wasmtime::component::Linker;

pub(super) use agent::RunContext;
pub(super) use filesystem::shadow_preopens;
pub(super) use outbound_http::WasiHttpHooks;

use super::bindings::{latest, v0_1};
use super::grants::{GrantTable, LimitKey, Limits, Record, Request, Reuse};
use super::state::HostState;

/// One host import.
pub trait Capability {
    /// Its interface in the contract package (`kv`, `outbound-http`).
    const INTERFACE: &'static str;
    /// Standard interfaces (`wasi:http/outgoing-handler`) whose import asks for it too: one
    /// capability, one grant and one policy, whichever import the guest's toolchain uses.
    const STANDARD: &'static [&'static str] = &[];
    /// The top-level keys of a grant file it reads, and its keys in `[limits]`.
    const KEYS: &'static [&'static str];
    const LIMIT_KEYS: &'static [LimitKey];
    /// Its part of the grant, read from those keys (the `[limits]` ones as a `limits` table).
    type Grant: DeserializeOwned + Default + Clone + Debug + PartialEq;
    /// What a component gets: its request, within the grant.
    type Granted: Default + Clone + Debug + PartialEq + Send + Sync;
    /// Per loaded component: counters, limiters, clients.
    type State: Send + Sync;

    /// `env` reads the environment (an origin may come from a variable).
    fn grant(
        request: &Request,
        grant: &Self::Grant,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self::Granted, String>;
    /// Whether anything of it was granted (a 0.1 component importing an interface it was
    /// granted nothing of is refused at load).
    fn granted_anything(granted: &Self::Granted) -> bool;
    /// What the registry entry lists.
    fn summary(granted: &Self::Granted) -> Vec<String>;
    fn state(granted: &Self::Granted) -> anyhow::Result<Self::State>;
    /// Once every capability has granted its part: what this one takes from the others' (its
    /// declared dependencies). Nothing, unless it says so.
    fn settle(
        _granted: &mut Granted,
        _grant: &Grant,
        _env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        Ok(())
    }
    /// The grant file lines that would give a component what it asks of this capability.
    fn suggest(request: &Request) -> Vec<String>;
    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()>;
}

/// The grant part of a capability that is always available.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// Adds an interface's host functions of every contract version to the linker. A capability
/// the newest contract added links `latest::...::add_to_linker` alone in its `link`.
macro_rules! link_versions {
    ($linker:expr, $interface:ident) => {{
        use wasmtime::component::HasSelf;
        $crate::wasm::bindings::v0_1::service::adapter::$interface::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >($linker, |s| s)?;
        $crate::wasm::bindings::latest::service::adapter::$interface::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >($linker, |s| s)
    }};
}
use link_versions;

macro_rules! capabilities {
    ($($field:ident: $cap:ty),* $(,)?) => {
        /// The operator's grant: the sandbox's limits and each capability's part.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Grant {
            pub limits: Limits,
            pub reuse: Reuse,
            pub record: Record,
            $(pub $field: <$cap as Capability>::Grant,)*
        }

        impl Grant {
            /// Reads a grant; a key no capability reads is an error.
            pub(crate) fn from_table(table: toml::Table) -> Result<Self, String> {
                let mut table = GrantTable::new(table)?;
                let grant = Self {
                    limits: table.take_limits()?,
                    reuse: table.take_reuse()?,
                    record: table.take_record()?,
                    $($field: table.take(<$cap>::KEYS, <$cap>::LIMIT_KEYS)?,)*
                };
                table.finish()?;
                Ok(grant)
            }
        }

        /// What a component gets.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Granted {
            pub limits: Limits,
            pub reuse: Reuse,
            pub record: Record,
            $(pub $field: <$cap as Capability>::Granted,)*
        }

        impl Granted {
            /// Requested ∩ granted. Values the operator wrote wrong are errors.
            pub fn new(
                request: &Request,
                grant: &Grant,
                env: impl Fn(&str) -> Option<String>,
            ) -> Result<Self, String> {
                let mut granted = Self {
                    limits: grant.limits,
                    reuse: grant.reuse,
                    record: grant.record,
                    $($field: <$cap>::grant(request, &grant.$field, &env)?,)*
                };
                $(<$cap>::settle(&mut granted, grant, &env)?;)*
                Ok(granted)
            }

            /// The registry entry's list of capabilities.
            pub fn summary(&self) -> Vec<String> {
                let mut out = Vec::new();
                $(out.extend(<$cap>::summary(&self.$field));)*
                if self.reuse.0 > 1 {
                    out.push(format!(
                        "reuse: up to {} requests per instance (a request can read what an \
                         earlier one left in memory)",
                        self.reuse.0
                    ));
                }
                if self.record != Record::Errors {
                    out.push(format!("record: {}", self.record.as_str()));
                }
                out
            }

            /// A grant file giving the component every import it was granted nothing of.
            pub fn suggested_grant(&self, request: &Request) -> String {
                let mut lines = Vec::new();
                $(
                    if request.imports.contains(<$cap>::INTERFACE)
                        && !<$cap>::granted_anything(&self.$field)
                    {
                        lines.extend(<$cap>::suggest(request));
                    }
                )*
                lines.join("\n")
            }

            /// Interfaces the component imports but was granted nothing of.
            pub fn ungranted(&self, request: &Request) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(
                    if request.imports.contains(<$cap>::INTERFACE)
                        && !<$cap>::granted_anything(&self.$field)
                    {
                        out.push(<$cap>::INTERFACE);
                    }
                )*
                out
            }
        }

        /// Each capability's state for one loaded component.
        pub struct States {
            $(pub $field: <$cap as Capability>::State,)*
        }

        impl States {
            pub fn new(granted: &Granted) -> anyhow::Result<Self> {
                Ok(Self { $($field: <$cap>::state(&granted.$field)?,)* })
            }
        }

        /// Interfaces of the contract package a component may import.
        pub(crate) const INTERFACES: &[&str] = &["types", $(<$cap as Capability>::INTERFACE),*];

        /// The capability a standard interface (named without its version) asks for, if any.
        pub(crate) fn standard(interface: &str) -> Option<&'static str> {
            [$((<$cap as Capability>::STANDARD, <$cap as Capability>::INTERFACE)),*]
                .into_iter()
                .find(|(standard, _)| standard.contains(&interface))
                .map(|(_, capability)| capability)
        }

        /// Adds every capability's host functions to the linker.
        pub(crate) fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
            link_versions!(linker, types)?;
            $(<$cap>::link(linker)?;)*
            Ok(())
        }
    };
}

capabilities! {
    registry: registry::Registry,
    log: log::Log,
    secrets: secrets::Secrets,
    outbound_http: outbound_http::OutboundHttp,
    agent: agent::Agent,
    tools: tools::Tools,
    kv: kv::Kv,
    jobs: jobs::Jobs,
}

impl Grant {
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::from_table(toml::from_str(text).map_err(|e| e.message().to_owned())?)
    }
}

impl v0_1::service::adapter::types::Host for HostState {}
impl latest::service::adapter::types::Host for HostState {}

/// Runs host work a guest asked for on the host's executor (see `guest_lane`). The future holds no
/// borrow of the store's state.
fn on_host<T: Send + 'static>(
    state: &HostState,
    work: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = T> + Send + 'static {
    let host = state.caller.services.host.clone();
    async move { super::guest_lane::on_host(&host, work).await }
}

/// Records a use of something not granted on the adapter's entry, and says so to the guest.
pub(super) fn denied(state: &HostState, message: String) -> latest::service::adapter::types::Error {
    state.caller.deny(&message);
    latest::service::adapter::types::Error::Denied(message)
}

/// Records a quota the adapter went past on its entry, and says so to the guest.
pub(crate) fn over_quota(
    state: &HostState,
    message: String,
) -> latest::service::adapter::types::Error {
    state.caller.over_quota(&message);
    latest::service::adapter::types::Error::QuotaExceeded(message)
}

/// How a 0.1 component, whose functions had no error results, learns of a refusal: the call
/// traps (the refusal is already on the entry).
pub(crate) fn trap(error: latest::service::adapter::types::Error) -> wasmtime::Error {
    use latest::service::adapter::types::Error;
    let (Error::Denied(m) | Error::QuotaExceeded(m) | Error::Invalid(m) | Error::Failed(m)) = error;
    wasmtime::Error::msg(m)
}
