//! Capability grants. A component requests capabilities in `describe()`; the operator grants
//! them in `<data_dir>/adapters/<name>.toml` (or `[adapters.<name>]` in config.toml; bundled
//! adapters ship a default). The component gets the intersection, nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

/// An operator's grant, as written in TOML.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Origins such as `https://slack.com` or `http://127.0.0.1:9000`.
    #[serde(default)]
    pub outbound_hosts: Vec<String>,
    /// Origins of URLs held in environment variables (an adapter whose API base is
    /// configurable): variable name → the URL used when it is unset.
    #[serde(default)]
    pub outbound_env: BTreeMap<String, String>,
    #[serde(default)]
    pub agent: bool,
    /// Tool names; `*` grants every tool.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub kv: bool,
    #[serde(default)]
    pub jobs: bool,
    #[serde(default)]
    pub limits: Limits,
}

/// Per-adapter limits (operator only; a component cannot raise them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub handle_http_ms: u64,
    pub run_job_ms: u64,
    pub memory_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handle_http_ms: 2_500,
            run_job_ms: 120_000,
            memory_mib: 64,
        }
    }
}

impl Limits {
    pub fn handle_http(&self) -> Duration {
        Duration::from_millis(self.handle_http_ms)
    }

    pub fn run_job(&self) -> Duration {
        Duration::from_millis(self.run_job_ms)
    }

    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

impl Grant {
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Adds the origins `outbound_env` names, read through `env`, to `outbound_hosts`.
    pub fn resolve_env(mut self, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        for (variable, default) in std::mem::take(&mut self.outbound_env) {
            let value = env(&variable).unwrap_or(default);
            let url = reqwest::Url::parse(&value)
                .map_err(|e| format!("{variable} is not a URL ({value:?}): {e}"))?;
            let origin = Origin::of(&url).ok_or_else(|| format!("{variable} has no host"))?;
            self.outbound_hosts.push(origin.to_string());
        }
        Ok(self)
    }
}

/// What a component asked for in `describe()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `(name, required)`.
    pub secrets: Vec<(String, bool)>,
    pub outbound_hosts: Vec<String>,
    pub agent: bool,
    pub tools: Vec<String>,
    pub kv: bool,
    pub jobs: bool,
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
        let host = url
            .host_str()
            .ok_or_else(|| format!("invalid origin {text:?}: no host"))?;
        Ok(Self {
            scheme: url.scheme().to_owned(),
            host: host.to_ascii_lowercase(),
            port: url.port_or_known_default().unwrap_or(80),
        })
    }

    pub fn of(url: &reqwest::Url) -> Option<Self> {
        Some(Self {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default()?,
        })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// The capabilities a component actually has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effective {
    pub secrets: BTreeSet<String>,
    /// Granted secrets the component marked required.
    pub required_secrets: Vec<String>,
    pub origins: BTreeSet<Origin>,
    pub agent: bool,
    /// `None` means every tool.
    pub tools: Option<BTreeSet<String>>,
    pub kv: bool,
    pub jobs: bool,
    pub limits: Limits,
}

impl Effective {
    /// Requested ∩ granted. Origins the operator wrote wrong are errors, not silently dropped.
    pub fn intersect(request: &Request, grant: &Grant) -> Result<Self, String> {
        let granted_origins = grant
            .outbound_hosts
            .iter()
            .map(|o| Origin::parse(o))
            .collect::<Result<BTreeSet<_>, _>>()?;
        let origins = if request.outbound_hosts.iter().any(|o| o == "*") {
            granted_origins
        } else {
            let mut origins = BTreeSet::new();
            for requested in &request.outbound_hosts {
                let origin = Origin::parse(requested)?;
                if granted_origins.contains(&origin) {
                    origins.insert(origin);
                }
            }
            origins
        };
        let secrets: BTreeSet<String> = request
            .secrets
            .iter()
            .filter(|(name, _)| grant.secrets.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        let required_secrets = request
            .secrets
            .iter()
            .filter(|(name, required)| *required && secrets.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        let all = |list: &[String]| list.iter().any(|t| t == "*");
        let tools = match (all(&request.tools), all(&grant.tools)) {
            (true, true) => None,
            (true, false) => Some(grant.tools.iter().cloned().collect()),
            (false, true) => Some(request.tools.iter().cloned().collect()),
            (false, false) => Some(
                request
                    .tools
                    .iter()
                    .filter(|t| grant.tools.contains(t))
                    .cloned()
                    .collect(),
            ),
        };
        Ok(Self {
            secrets,
            required_secrets,
            origins,
            agent: request.agent && grant.agent,
            tools,
            kv: request.kv && grant.kv,
            jobs: request.jobs && grant.jobs,
            limits: grant.limits,
        })
    }

    /// Whether anything of the named import interface was granted (`registry` and `log` are
    /// always available).
    pub fn allows_interface(&self, interface: &str) -> bool {
        match interface {
            "registry" | "log" => true,
            "agent" => self.agent,
            "tools" => self.tools.as_ref().is_none_or(|t| !t.is_empty()),
            "outbound-http" => !self.origins.is_empty(),
            "secrets" => !self.secrets.is_empty(),
            "kv" => self.kv,
            "jobs" => self.jobs,
            _ => false,
        }
    }

    /// Whether the grant covers a tool; a gated tool (`gate` is its variable) must be named
    /// explicitly, never through `*`, and `gate_open` must say its variable is `true`.
    pub fn allows_tool(
        &self,
        name: &str,
        gate: Option<&str>,
        gate_open: impl Fn(&str) -> bool,
    ) -> bool {
        match gate {
            None => self.tools.as_ref().is_none_or(|t| t.contains(name)),
            Some(gate) => self.tools.as_ref().is_some_and(|t| t.contains(name)) && gate_open(gate),
        }
    }

    /// The granted capabilities as the registry lists them.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.agent {
            out.push("agent".to_owned());
        }
        match &self.tools {
            None => out.push("tools:*".to_owned()),
            Some(tools) => out.extend(tools.iter().map(|t| format!("tool:{t}"))),
        }
        out.extend(self.origins.iter().map(|o| format!("origin:{o}")));
        out.extend(self.secrets.iter().map(|s| format!("secret:{s}")));
        if self.kv {
            out.push("kv".to_owned());
        }
        if self.jobs {
            out.push("jobs".to_owned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            secrets: vec![
                ("SERVICE_TEAMCHAT_SIGNING_SECRET".into(), true),
                ("OTHER".into(), true),
            ],
            outbound_hosts: vec!["https://slack.com".into(), "https://evil.example".into()],
            agent: true,
            tools: vec!["*".into()],
            kv: true,
            jobs: false,
        }
    }

    #[test]
    fn the_component_gets_the_intersection() {
        let grant = Grant::parse(
            "secrets = [\"SERVICE_TEAMCHAT_SIGNING_SECRET\"]\noutbound_hosts = [\"https://slack.com:443\"]\n\
             agent = true\ntools = [\"search_notes\"]\njobs = true\n[limits]\nhandle_http_ms = 500\n",
        )
        .unwrap();
        let effective = Effective::intersect(&request(), &grant).unwrap();
        assert_eq!(
            effective.secrets.iter().collect::<Vec<_>>(),
            ["SERVICE_TEAMCHAT_SIGNING_SECRET"]
        );
        assert_eq!(
            effective.required_secrets,
            ["SERVICE_TEAMCHAT_SIGNING_SECRET"]
        );
        assert_eq!(
            effective.origins.len(),
            1,
            "the default port matches the explicit one"
        );
        assert!(effective.agent && !effective.kv && !effective.jobs);
        let open = |_: &str| true;
        assert!(
            effective.allows_tool("search_notes", None, open)
                && !effective.allows_tool("shell_exec", None, open)
        );
        assert_eq!(effective.limits.handle_http(), Duration::from_millis(500));
        assert_eq!(
            effective.limits.memory_mib, 64,
            "unset limits keep their defaults"
        );
        assert!(!effective.allows_interface("kv") && effective.allows_interface("outbound-http"));
        assert!(!effective.allows_interface("teleport"));
    }

    #[test]
    fn nothing_granted_means_nothing() {
        let effective = Effective::intersect(&request(), &Grant::default()).unwrap();
        assert!(effective.secrets.is_empty() && effective.origins.is_empty() && !effective.agent);
        assert_eq!(effective.tools, Some(BTreeSet::new()));
        assert!(effective.summary().is_empty());
    }

    #[test]
    fn bad_grants_are_errors() {
        assert!(
            Grant::parse("secretz = []")
                .unwrap_err()
                .contains("unknown field")
        );
        let grant = Grant {
            outbound_hosts: vec!["ftp://x".into()],
            ..Grant::default()
        };
        assert!(
            Effective::intersect(&request(), &grant)
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
    fn origins_can_come_from_the_environment() {
        let grant = Grant::parse(
            "[outbound_env]\nAPI_BASE = \"https://slack.com/api\"\nOTHER_BASE = \"https://x.example\"\n",
        )
        .unwrap();
        let local = |name: &str| (name == "API_BASE").then(|| "http://127.0.0.1:4000/api".into());
        let resolved = grant.clone().resolve_env(local).unwrap();
        assert_eq!(
            resolved.outbound_hosts,
            ["http://127.0.0.1:4000", "https://x.example:443"]
        );
        let defaults = grant.resolve_env(|_| None).unwrap();
        assert_eq!(defaults.outbound_hosts[0], "https://slack.com:443");
        let broken = Grant::parse("[outbound_env]\nAPI_BASE = \"not a url\"\n").unwrap();
        assert!(
            broken
                .resolve_env(|_| None)
                .unwrap_err()
                .contains("API_BASE")
        );
    }

    #[test]
    fn a_star_request_takes_what_the_operator_grants() {
        let asked = Request {
            outbound_hosts: vec!["*".into()],
            ..Request::default()
        };
        let grant = Grant {
            outbound_hosts: vec!["http://127.0.0.1:9000".into()],
            ..Grant::default()
        };
        let effective = Effective::intersect(&asked, &grant).unwrap();
        assert_eq!(
            effective.origins.iter().map(|o| o.port).collect::<Vec<_>>(),
            [9000]
        );
        assert!(
            Effective::intersect(&asked, &Grant::default())
                .unwrap()
                .origins
                .is_empty()
        );
    }
}
