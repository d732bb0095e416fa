//! Capability grants. A component requests capabilities (a 0.1 component lists them in
//! `describe()`; newer ones request what they import); the operator grants them in
//! `<data_dir>/adapters/<name>.toml` (or `[adapters.<name>]` in config.toml; bundled adapters
//! ship a default). The component gets the intersection, nothing else.
//!
//! A grant file is one TOML table: each capability (`caps/`) reads its own keys, the sandbox
//! reads its own `[limits]`, and a key nobody reads is an error.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;

pub use super::caps::{Grant, Granted};

/// What a component asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// Interfaces of the contract package it imports (`kv`, `agent`, ...).
    pub imports: BTreeSet<String>,
    /// What a 0.1 component listed in `describe()`; newer ones list nothing, their imports
    /// are their request.
    pub listed: Option<Listed>,
    /// Secrets it cannot work without.
    pub required_secrets: Vec<String>,
}

impl Request {
    /// Whether it asks for `interface`: it imports it and, if it lists capabilities, lists it.
    pub fn wants(&self, interface: &str, listed: impl FnOnce(&Listed) -> bool) -> bool {
        self.imports.contains(interface) && self.listed.as_ref().is_none_or(listed)
    }
}

/// The capability list of a 0.1 component's `describe()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    pub secrets: Vec<String>,
    pub outbound_hosts: Vec<String>,
    pub agent: bool,
    pub tools: Vec<String>,
    pub kv: bool,
    pub jobs: bool,
}

/// The sandbox's limits of one adapter (operator only; a component cannot raise them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub handle_http_ms: u64,
    pub run_job_ms: u64,
    pub memory_mib: u64,
    /// Its instances at once (requests, jobs, hooks and tool calls together).
    pub max_instances: u32,
    /// Recordings kept (`record`), the newest; older ones are dropped as new ones come.
    pub recordings_kept: u32,
    /// The most one recording holds: imports past it are counted, not kept.
    pub recording_kib: u32,
    /// Recordings older than this are dropped.
    pub recordings_hours: u32,
    /// The share of live calls a shadow build is run on, in percent (see `shadow`).
    pub shadow_percent: u32,
    /// The most of the time a shadow build runs, in percent: after a comparison that took
    /// `t`, calls are skipped for `t * (100 / shadow_duty_percent - 1)`.
    pub shadow_duty_percent: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handle_http_ms: 2_500,
            run_job_ms: 120_000,
            memory_mib: 64,
            max_instances: 16,
            recordings_kept: 100,
            recording_kib: 256,
            recordings_hours: 168,
            shadow_percent: 100,
            shadow_duty_percent: 10,
        }
    }
}

/// Requests one instance may serve (`reuse`, see `reuse.rs`): 1, a fresh instance each, unless
/// the grant says more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse(pub u32);

impl Default for Reuse {
    fn default() -> Self {
        Self(1)
    }
}

/// Which calls are recorded (`record`, see `recording`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Record {
    Off,
    /// The calls that failed: what an author needs after the fact, at no write for the calls
    /// that went well.
    #[default]
    Errors,
    All,
}

impl Record {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Errors => "errors",
            Self::All => "all",
        }
    }
}

/// A key of `[limits]` and the largest value it takes (the least is 1): a value past it is a
/// grant error naming the bound, never silently clamped.
#[derive(Debug, Clone, Copy)]
pub struct LimitKey {
    pub name: &'static str,
    pub max: u64,
}

impl Limits {
    /// The `[limits]` keys the sandbox reads.
    pub(crate) const KEYS: &'static [LimitKey] = &[
        LimitKey {
            name: "handle_http_ms",
            max: 120_000,
        },
        LimitKey {
            name: "run_job_ms",
            max: 3_600_000,
        },
        LimitKey {
            name: "memory_mib",
            max: (super::wasmtime_config::MAX_MEMORY >> 20) as u64,
        },
        LimitKey {
            name: "max_instances",
            max: super::wasmtime_config::MAX_INSTANCES_PER_ADAPTER as u64,
        },
        LimitKey {
            name: "recordings_kept",
            max: 10_000,
        },
        LimitKey {
            name: "recording_kib",
            max: 16_384,
        },
        LimitKey {
            name: "recordings_hours",
            max: 8_760,
        },
        LimitKey {
            name: "shadow_percent",
            max: 100,
        },
        LimitKey {
            name: "shadow_duty_percent",
            max: 100,
        },
    ];

    pub fn handle_http(&self) -> Duration {
        Duration::from_millis(self.handle_http_ms)
    }

    pub fn run_job(&self) -> Duration {
        Duration::from_millis(self.run_job_ms)
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

/// A grant file being read: each reader takes its keys out; what is left over is unknown.
pub(crate) struct GrantTable {
    top: toml::Table,
    limits: toml::Table,
}

impl GrantTable {
    pub(crate) fn new(mut top: toml::Table) -> Result<Self, String> {
        let limits = match top.remove("limits") {
            None => toml::Table::new(),
            Some(toml::Value::Table(limits)) => limits,
            Some(_) => return Err("`limits` must be a table ([limits])".into()),
        };
        Ok(Self { top, limits })
    }

    /// Deserializes `T` from the top-level `keys` (plus, as a `limits` table, the
    /// `limit_keys` of `[limits]`).
    pub(crate) fn take<T: DeserializeOwned>(
        &mut self,
        keys: &[&str],
        limit_keys: &[LimitKey],
    ) -> Result<T, String> {
        let mut own = toml::Table::new();
        for key in keys {
            if let Some(value) = self.top.remove(*key) {
                own.insert((*key).to_owned(), value);
            }
        }
        let limits = self.take_limit_keys(limit_keys)?;
        if !limits.is_empty() {
            own.insert("limits".into(), toml::Value::Table(limits));
        }
        T::deserialize(toml::Value::Table(own)).map_err(|e| e.message().to_owned())
    }

    /// `reuse`: how many requests one instance may serve (1 when not written).
    pub(crate) fn take_reuse(&mut self) -> Result<Reuse, String> {
        let Some(value) = self.top.remove("reuse") else {
            return Ok(Reuse::default());
        };
        match value.as_integer() {
            Some(n) if n >= 1 && n <= i64::from(super::reuse::MAX_REUSE) => Ok(Reuse(n as u32)),
            Some(n) => Err(format!(
                "reuse = {n} is out of range: it takes 1 to {}",
                super::reuse::MAX_REUSE
            )),
            None => Err("reuse must be a whole number".into()),
        }
    }

    /// `record`: which calls are recorded (failures when not written).
    pub(crate) fn take_record(&mut self) -> Result<Record, String> {
        let Some(value) = self.top.remove("record") else {
            return Ok(Record::default());
        };
        [Record::Off, Record::Errors, Record::All]
            .into_iter()
            .find(|mode| value.as_str() == Some(mode.as_str()))
            .ok_or_else(|| format!("record = {value} is not one of \"off\", \"errors\", \"all\""))
    }

    /// The sandbox's `[limits]`.
    pub(crate) fn take_limits(&mut self) -> Result<Limits, String> {
        let own = self.take_limit_keys(Limits::KEYS)?;
        Limits::deserialize(toml::Value::Table(own)).map_err(|e| e.message().to_owned())
    }

    /// The `[limits]` entries of `keys`, each within its bounds.
    fn take_limit_keys(&mut self, keys: &[LimitKey]) -> Result<toml::Table, String> {
        let mut taken = toml::Table::new();
        for key in keys {
            let Some(value) = self.limits.remove(key.name) else {
                continue;
            };
            match value.as_integer() {
                Some(n) if n >= 1 && n as u64 <= key.max => {}
                Some(n) => {
                    return Err(format!(
                        "limits.{} = {n} is out of range: it takes 1 to {}",
                        key.name, key.max
                    ));
                }
                None => return Err(format!("limits.{} must be a whole number", key.name)),
            }
            taken.insert(key.name.to_owned(), value);
        }
        Ok(taken)
    }

    /// Fails on the first key no capability read.
    pub(crate) fn finish(self) -> Result<(), String> {
        if let Some(key) = self.top.keys().next() {
            return Err(format!("unknown key `{key}`"));
        }
        if let Some(key) = self.limits.keys().next() {
            return Err(format!("unknown key `{key}` in [limits]"));
        }
        Ok(())
    }
}

/// An origin: scheme, host and port (the scheme's default when not written).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Origin {
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = reqwest::Url::parse(text).map_err(|e| format!("invalid origin {text:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("invalid origin {text:?}: only http and https"));
        }
        if url.path() != "/" || url.query().is_some() {
            return Err(format!(
                "invalid origin {text:?}: give scheme, host and port only"
            ));
        }
        Self::of(&url).ok_or_else(|| format!("invalid origin {text:?}: no host"))
    }

    pub fn of(url: &reqwest::Url) -> Option<Self> {
        Some(Self {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default()?,
        })
    }

    /// Parses a list of origins; one written wrong is an error, not silently dropped.
    pub(crate) fn parse_all<'a>(
        texts: impl IntoIterator<Item = &'a String>,
    ) -> Result<BTreeSet<Self>, String> {
        texts.into_iter().map(|o| Self::parse(o)).collect()
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(imports: &[&str], listed: Option<Listed>) -> Request {
        Request {
            imports: imports.iter().map(|s| (*s).to_owned()).collect(),
            listed,
            required_secrets: Vec::new(),
        }
    }

    #[test]
    fn a_listing_component_gets_the_intersection() {
        let grant = Grant::parse(
            "secrets = [\"SIGNING\"]\noutbound_hosts = [\"https://slack.com:443\"]\n\
             agent = true\ntools = [\"search_notes\"]\njobs = true\n[limits]\nhandle_http_ms = 500\n",
        )
        .unwrap();
        let listed = Listed {
            secrets: vec!["SIGNING".into(), "OTHER".into()],
            outbound_hosts: vec!["https://slack.com".into(), "https://evil.example".into()],
            agent: true,
            tools: vec!["*".into()],
            kv: true,
            jobs: false,
        };
        let asked = request(
            &["secrets", "outbound-http", "agent", "tools", "kv", "jobs"],
            Some(listed),
        );
        let granted = Granted::new(&asked, &grant, |_| None).unwrap();
        assert_eq!(
            granted.secrets.names.iter().collect::<Vec<_>>(),
            ["SIGNING"]
        );
        assert_eq!(
            granted.outbound_http.origins.len(),
            1,
            "the default port matches"
        );
        assert!(granted.agent.allowed && !granted.kv.allowed && !granted.jobs.allowed);
        assert_eq!(granted.limits.handle_http(), Duration::from_millis(500));
        assert_eq!(
            granted.limits.memory_mib, 64,
            "unset limits keep their defaults"
        );
        assert_eq!(granted.ungranted(&asked), ["kv", "jobs"]);
    }

    #[test]
    fn a_newer_component_requests_what_it_imports() {
        let grant = Grant::parse("kv = true\nagent = true\n").unwrap();
        let granted = Granted::new(&request(&["kv"], None), &grant, |_| None).unwrap();
        assert!(granted.kv.allowed);
        assert!(!granted.agent.allowed, "granted, but not imported");
        assert_eq!(granted.summary(), ["kv"]);
    }

    #[test]
    fn nothing_granted_means_nothing() {
        let asked = request(&["secrets", "outbound-http", "agent", "tools"], None);
        let granted = Granted::new(&asked, &Grant::default(), |_| None).unwrap();
        assert!(granted.summary().is_empty(), "{:?}", granted.summary());
        assert_eq!(
            granted.ungranted(&asked),
            ["secrets", "outbound-http", "agent", "tools"]
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(
            Grant::parse("secretz = []")
                .unwrap_err()
                .contains("unknown key `secretz`")
        );
        assert!(
            Grant::parse("[limits]\nfuel = 1")
                .unwrap_err()
                .contains("unknown key `fuel` in [limits]")
        );
        assert!(Grant::parse("kv = \"yes\"").is_err());
        // Every limit has a range, and a value past it is refused, never clamped.
        for (limit, said) in [
            (
                "memory_mib = 100000",
                "limits.memory_mib = 100000 is out of range: it takes 1 to 256",
            ),
            (
                "max_instances = 64",
                "limits.max_instances = 64 is out of range: it takes 1 to 32",
            ),
            (
                "kv_total_bytes = 0",
                "limits.kv_total_bytes = 0 is out of range",
            ),
            (
                "log_lines_per_minute = -1",
                "limits.log_lines_per_minute = -1 is out of range",
            ),
            (
                "run_job_ms = 1.5",
                "limits.run_job_ms must be a whole number",
            ),
        ] {
            let refused = Grant::parse(&format!("[limits]\n{limit}")).unwrap_err();
            assert!(refused.contains(said), "{limit}: {refused}");
        }
        assert!(Grant::parse("[limits]\nmemory_mib = 256\nmax_instances = 32").is_ok());
        let grant = Grant::parse("outbound_hosts = [\"ftp://x\"]").unwrap();
        let asked = request(&["outbound-http"], None);
        assert!(
            Granted::new(&asked, &grant, |_| None)
                .unwrap_err()
                .contains("only http and https")
        );
        assert!(
            Origin::parse("https://slack.com/api")
                .unwrap_err()
                .contains("host and port only")
        );
    }

    #[test]
    fn credentials_follow_configurable_origins() {
        let grant = Grant::parse(
            "secrets = [\"USER\", \"TOKEN\"]\n\
             [outbound_env]\nAPI = \"https://api.example\"\nDAV = \"\"\n\
             [secret_origins]\nTOKEN = [\"API\"]\nUSER = [\"DAV\", \"https://x.example\"]\n",
        )
        .unwrap();
        let asked = request(&["secrets", "outbound-http"], None);
        let origin = |text: &str| Origin::parse(text).unwrap();

        // Unset: the API's default, and nothing for a server only the operator can name.
        let granted = Granted::new(&asked, &grant, |_| None).unwrap();
        assert_eq!(
            granted.outbound_http.origins.iter().collect::<Vec<_>>(),
            [&origin("https://api.example")]
        );
        assert!(
            granted
                .secrets
                .may_send("TOKEN", &origin("https://api.example"))
        );
        assert!(
            !granted
                .secrets
                .may_send("USER", &origin("https://api.example"))
        );
        assert!(
            granted
                .secrets
                .may_send("USER", &origin("https://x.example"))
        );

        // Pointed elsewhere (a test's fake, a self-hosted server), the credentials follow.
        let env = |name: &str| match name {
            "API" => Some("http://127.0.0.1:9000/v1".to_owned()),
            "DAV" => Some("https://dav.example/user/".to_owned()),
            _ => None,
        };
        let granted = Granted::new(&asked, &grant, env).unwrap();
        assert!(
            granted
                .secrets
                .may_send("TOKEN", &origin("http://127.0.0.1:9000"))
        );
        assert!(
            !granted
                .secrets
                .may_send("TOKEN", &origin("https://api.example"))
        );
        assert!(
            granted
                .secrets
                .may_send("USER", &origin("https://dav.example"))
        );
        assert!(
            !granted
                .secrets
                .may_send("USER", &origin("http://127.0.0.1:9000"))
        );

        let unknown =
            Grant::parse("secrets = [\"TOKEN\"]\n[secret_origins]\nTOKEN = [\"NOWHERE\"]\n")
                .unwrap();
        let refused = Granted::new(&asked, &unknown, |_| None).unwrap_err();
        assert!(
            refused.contains("NOWHERE is not an [outbound_env] variable"),
            "{refused}"
        );
    }

    #[test]
    fn every_capability_reads_only_its_own_keys() {
        // A grant naming every key parses: the key lists and the structs agree.
        let grant = Grant::parse(
            "secrets = [\"A\"]\noutbound_hosts = [\"https://x.example\"]\nagent = true\n\
             tools = [\"*\"]\nkv = true\njobs = true\n\
             [secret_origins]\nA = [\"https://x.example\"]\n\
             [outbound_env]\nAPI = \"https://x.example\"\n\
             [limits]\nhandle_http_ms = 1\nrun_job_ms = 1\nmemory_mib = 1\nmax_instances = 1\n\
             recordings_kept = 1\nrecording_kib = 1\nrecordings_hours = 1\n\
             agent_runs_at_once = 1\nagent_runs_per_minute = 1\nkv_key_bytes = 1\n\
             kv_value_bytes = 1\nkv_total_bytes = 1\njobs_pending = 1\njob_payload_bytes = 1\n\
             log_lines_per_minute = 1\n",
        );
        assert!(grant.is_ok(), "{grant:?}");
    }
}
