//! Where the service keeps its state and what `config.toml` may say. Secrets never come from
//! here: see [`crate::settings_store`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::a2a::settings::A2aSection;
use crate::mcp::settings::{McpSection, McpServerSection};
use crate::retention::RetentionSection;

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8765;
const APP_DIR: &str = "service-runtime";

/// The parsed `<data_dir>/config.toml`. Unknown keys are errors, so a typo (or a secret
/// pasted where it does not belong) is reported instead of silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub provider: ProviderSection,
    #[serde(default)]
    pub engine: EngineSection,
    #[serde(default)]
    pub tools: ToolsSection,
    #[serde(default)]
    pub jobs: JobsSection,
    #[serde(default)]
    pub database: DatabaseSection,
    /// `[mcp]`: MCP servers whose tools agents may use.
    #[serde(default)]
    pub mcp: McpSection,
    /// `[mcp_server]`: what `/mcp` and `service-runtime mcp` serve besides the agents.
    #[serde(default)]
    pub mcp_server: McpServerSection,
    /// `[a2a]`: remote agents whose skills agents may call over A2A.
    #[serde(default)]
    pub a2a: A2aSection,
    /// `[conversations]`: how much of a conversation a new turn sends the model.
    #[serde(default)]
    pub conversations: ConversationsSection,
    /// `[approvals]`: how long a tool call waits for a person.
    #[serde(default)]
    pub approvals: ApprovalsSection,
    /// `[runs]`: what is kept of a run's stream for clients that re-join it.
    #[serde(default)]
    pub runs: RunsSection,
    /// `[webhooks]`: how runs' completion webhooks are delivered.
    #[serde(default)]
    pub webhooks: WebhooksSection,
    #[serde(default)]
    pub auth: AuthSection,
    /// `[retention]`: how long traces, tasks, conversations and approvals are kept.
    #[serde(default)]
    pub retention: RetentionSection,
    /// `[sandbox]`: how the WebAssembly engines reset a freed instance's memory.
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// `[adapters.<name>]`: capability grants of WebAssembly adapters, read by their loader
    /// (a `<name>.toml` beside the component wins).
    #[serde(default)]
    pub adapters: BTreeMap<String, toml::Table>,
}

/// `[sandbox]`: how a freed instance's memory slot is made ready for the next instance (the
/// figures behind each default are in the book's Component performance chapter).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// KiB of a linear memory reset in place and kept mapped, the rest unmapped (0 to 262144):
    /// default 2048.
    pub memory_keep_resident_kib: Option<u64>,
    /// KiB of a table reset in place and kept mapped (0 to 1024): default 512.
    pub table_keep_resident_kib: Option<u64>,
    /// Whether a large component's memory is reset from the pages the kernel reports written
    /// (`PAGEMAP_SCAN`, never where swap is on): default true.
    pub written_pages_only: Option<bool>,
    /// MiB of a memory image mapped densely whatever its holes (0 to 256): default 16.
    pub dense_image_mib: Option<u64>,
    /// Unmappings made together in one system call (1 to 1024): default 1.
    pub decommit_batch: Option<u32>,
}

impl SandboxSection {
    pub fn memory_keep_resident(&self) -> usize {
        (self.memory_keep_resident_kib.unwrap_or(2048) << 10) as usize
    }

    pub fn table_keep_resident(&self) -> usize {
        (self.table_keep_resident_kib.unwrap_or(512) << 10) as usize
    }

    pub fn written_pages_only(&self) -> bool {
        self.written_pages_only.unwrap_or(true)
    }

    pub fn dense_image(&self) -> u64 {
        self.dense_image_mib.unwrap_or(16) << 20
    }

    pub fn decommit_batch(&self) -> usize {
        self.decommit_batch.unwrap_or(1) as usize
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(0..=262_144).contains(&self.memory_keep_resident_kib.unwrap_or(0))
            || !(0..=1024).contains(&self.table_keep_resident_kib.unwrap_or(0))
            || !(0..=256).contains(&self.dense_image_mib.unwrap_or(0))
            || !(1..=1024).contains(&self.decommit_batch.unwrap_or(1))
        {
            bail!(
                "[sandbox] memory_keep_resident_kib must be between 0 and 262144, \
                 table_keep_resident_kib between 0 and 1024, dense_image_mib between 0 and 256, \
                 decommit_batch between 1 and 1024"
            );
        }
        Ok(())
    }
}

/// `[database]`: how this replica uses PostgreSQL when `SERVICE_DATABASE_URL` names one.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSection {
    /// Connections this replica opens at most: default 16.
    pub pool_size: Option<usize>,
    /// Refused with a message: the URL may carry a password.
    url: Option<toml::Value>,
}

impl DatabaseSection {
    pub fn pool_size(&self) -> usize {
        self.pool_size.unwrap_or(crate::db::DEFAULT_POOL_SIZE)
    }

    fn check(&self) -> anyhow::Result<()> {
        if self.url.is_some() {
            bail!(
                "[database] url is not read from config.toml, which is no place for a password: \
                 set SERVICE_DATABASE_URL in the environment or in the data directory's .env"
            );
        }
        if !(1..=1024).contains(&self.pool_size()) {
            bail!("[database] pool_size must be between 1 and 1024");
        }
        Ok(())
    }
}

/// `[conversations]`: the history a turn sends the model, newest first until either bound.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationsSection {
    /// Earlier messages at most (1 to 1000): default 50.
    pub history_messages: Option<usize>,
    /// Their characters at most (1 to 1000000): default 32000.
    pub history_chars: Option<usize>,
    /// A second message while the first is answered: `enqueue` (default), `reject`,
    /// `interrupt`.
    #[serde(default)]
    pub double_texting: crate::conversations::DoubleTexting,
}

impl ConversationsSection {
    pub fn budget(&self) -> crate::conversations::Budget {
        crate::conversations::Budget {
            messages: self.history_messages.unwrap_or(50),
            chars: self.history_chars.unwrap_or(32_000),
        }
    }

    fn check(&self) -> anyhow::Result<()> {
        let budget = self.budget();
        if !(1..=1000).contains(&budget.messages) || !(1..=1_000_000).contains(&budget.chars) {
            bail!(
                "[conversations] history_messages must be between 1 and 1000, history_chars \
                 between 1 and 1000000"
            );
        }
        Ok(())
    }
}

/// `[runs]`: the frames of a run's stream kept for clients that re-join it. Past either bound
/// a run's further tokens and tool frames are not kept (nor sent): one `truncated` frame says
/// so, and the run's last frame is always kept.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsSection {
    /// Frames per run (100 to 1000000): default 10000.
    pub max_events: Option<usize>,
    /// Their bytes per run (64 KiB to 256 MiB): default 8 MiB.
    pub max_event_bytes: Option<usize>,
    /// Hours a finished run's frames are kept (1 to 8760): default 24.
    pub events_kept_hours: Option<u64>,
}

impl RunsSection {
    pub fn max_events(&self) -> usize {
        self.max_events.unwrap_or(10_000)
    }

    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes.unwrap_or(8 << 20)
    }

    pub fn events_kept(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.events_kept_hours.unwrap_or(24) * 3600)
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(100..=1_000_000).contains(&self.max_events())
            || !((64 << 10)..=(256 << 20)).contains(&self.max_event_bytes())
            || !(1..=8760).contains(&self.events_kept_hours.unwrap_or(24))
        {
            bail!(
                "[runs] max_events must be between 100 and 1000000, max_event_bytes between \
                 65536 and 268435456, events_kept_hours between 1 and 8760"
            );
        }
        Ok(())
    }
}

/// `[webhooks]`: runs' completion webhooks.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksSection {
    /// Whether a webhook may go to a loopback or private address (a receiver on this machine
    /// or network): default false, since whoever starts a run chooses the URL.
    pub allow_private: Option<bool>,
    /// How long one attempt may take, connecting included (100 to 60000): default 10000.
    pub timeout_ms: Option<u64>,
    /// Attempts before a delivery is given up (1 to 20): default 8.
    pub max_attempts: Option<u32>,
    /// The wait before the first retry (100 to 3600000); each next one waits four times
    /// longer, at most an hour: default 5000.
    pub first_retry_ms: Option<u64>,
}

impl WebhooksSection {
    pub fn allow_private(&self) -> bool {
        self.allow_private.unwrap_or(false)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(10_000))
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(8)
    }

    /// The wait after failed attempt `attempt` (from 1).
    pub fn retry_after(&self, attempt: u32) -> Duration {
        let first = self.first_retry_ms.unwrap_or(5_000);
        let factor = 4u64.saturating_pow(attempt.saturating_sub(1));
        Duration::from_millis(first.saturating_mul(factor).min(3_600_000))
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(100..=60_000).contains(&self.timeout_ms.unwrap_or(10_000))
            || !(1..=20).contains(&self.max_attempts())
            || !(100..=3_600_000).contains(&self.first_retry_ms.unwrap_or(5_000))
        {
            bail!(
                "[webhooks] timeout_ms must be between 100 and 60000, max_attempts between 1 \
                 and 20, first_retry_ms between 100 and 3600000"
            );
        }
        Ok(())
    }
}

/// `[jobs]`: the adapters' deferred work.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsSection {
    /// Jobs running at once (they mostly wait on the model): default 16.
    pub workers: Option<usize>,
    /// How often a job may start (crashes, shutdowns, retries): default 3.
    pub attempts: Option<u32>,
    /// How long shutdown waits for running jobs: default 30 s.
    pub grace_secs: Option<u64>,
    /// How long a replica's hold on a running job lasts without renewal (it renews a quarter
    /// of the way); a job whose replica died runs again elsewhere after this: default 20 s.
    pub lease_secs: Option<u64>,
    /// Finished jobs kept per adapter, with their tasks (their payloads go when they finish);
    /// older ones are deleted: default 1,000.
    pub keep_finished: Option<u32>,
}

impl JobsSection {
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(16)
    }

    pub fn attempts(&self) -> u32 {
        self.attempts.unwrap_or(3)
    }

    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_secs.unwrap_or(30))
    }

    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs.unwrap_or(20))
    }

    pub fn keep_finished(&self) -> u32 {
        self.keep_finished.unwrap_or(1_000)
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(1..=1024).contains(&self.workers()) {
            bail!("[jobs] workers must be between 1 and 1024");
        }
        if !(1..=100).contains(&self.attempts()) {
            bail!("[jobs] attempts must be between 1 and 100");
        }
        if self.keep_finished() > 1_000_000 {
            bail!("[jobs] keep_finished must be at most 1000000");
        }
        if !(4..=3600).contains(&self.lease().as_secs()) {
            bail!("[jobs] lease_secs must be between 4 and 3600");
        }
        Ok(())
    }
}

/// `[provider]`: which LLM provider and model runs agents (the environment overrides both).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub default: Option<String>,
    pub model: Option<String>,
    /// How long a provider may stay silent (before answering, or mid-stream); default 120.
    pub timeout_secs: Option<u64>,
}

/// `[engine]`: limits of the agent loop.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    pub max_iterations: Option<u32>,
    /// LLM calls a top-level run and every run it delegates to may make together.
    pub llm_call_budget: Option<u32>,
}

/// `[tools.<name>]`: `approval = true` makes the tool's calls wait for a person (a name
/// ending in `*` covers the tools it starts); `[tools.web_search]` also says where to search.
#[derive(Debug, Default, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Table>")]
pub struct ToolsSection {
    pub web_search: Option<WebSearchSection>,
    /// The tools whose calls wait for approval.
    pub approval: Vec<String>,
}

impl TryFrom<BTreeMap<String, toml::Table>> for ToolsSection {
    type Error = String;

    fn try_from(tables: BTreeMap<String, toml::Table>) -> Result<Self, String> {
        let mut section = Self::default();
        for (name, mut table) in tables {
            match table.remove("approval") {
                None => {}
                Some(toml::Value::Boolean(true)) => section.approval.push(name.clone()),
                Some(toml::Value::Boolean(false)) => {}
                Some(other) => {
                    return Err(format!(
                        "[tools.{name}] approval must be true or false, not {other}"
                    ));
                }
            }
            if name == "web_search" {
                if !table.is_empty() {
                    section.web_search = Some(
                        WebSearchSection::deserialize(toml::Value::Table(table))
                            .map_err(|e| format!("[tools.web_search]: {e}"))?,
                    );
                }
            } else if let Some(key) = table.keys().next() {
                return Err(format!(
                    "[tools.{name}] has an unknown key {key:?}; a tool's section takes approval"
                ));
            }
        }
        Ok(section)
    }
}

/// `[approvals]`: a call no one decides on within `timeout_secs` (default 86400, a day) is
/// denied.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    pub timeout_secs: Option<u64>,
}

impl ApprovalsSection {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.unwrap_or(86_400))
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(1..=31_536_000).contains(&self.timeout().as_secs()) {
            bail!("[approvals] timeout_secs must be between 1 and 31536000 (a year)");
        }
        Ok(())
    }
}

/// `[tools.web_search]`: a SearXNG instance (`url`) or Brave (`BRAVE_SEARCH_API_KEY` from the
/// environment). Without this section the `web_search` tool is not offered.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "provider", rename_all = "lowercase")]
pub enum WebSearchSection {
    Searxng { url: String },
    Brave { url: Option<String> },
}

/// `[auth]`: who may call (see `access`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// Every request needs a credential even on a loopback bind.
    #[serde(default)]
    pub required: bool,
    /// The specification's loopback-only endpoints (the task delete, the key write) take
    /// admins from other machines too: a departure from the specification.
    #[serde(default)]
    pub remote_admin: bool,
    /// Days an audit entry is kept (1 to 3650): default 90.
    pub audit_keep_days: Option<u64>,
    /// Audit entries kept at most, the oldest dropped first (1,000 to 10,000,000): default
    /// 100,000.
    pub audit_max_rows: Option<u64>,
    /// Agent runs one principal other than the owner may start per minute (1 to 100,000):
    /// default 60.
    pub runs_per_minute: Option<u32>,
    /// Hours a session lasts unused (1 to 720): default 24.
    pub session_idle_hours: Option<u32>,
    /// Days a session lasts at most (1 to 365): default 14.
    pub session_max_days: Option<u32>,
    /// `[auth.oidc]`: single sign-on with an OpenID provider.
    pub oidc: Option<crate::access::single_sign_on::OidcSection>,
}

impl AuthSection {
    pub fn audit_keep(&self) -> Duration {
        Duration::from_secs(self.audit_keep_days.unwrap_or(90) * 86_400)
    }

    pub fn audit_max_rows(&self) -> u64 {
        self.audit_max_rows.unwrap_or(100_000)
    }

    pub fn runs_per_minute(&self) -> u32 {
        self.runs_per_minute.unwrap_or(60)
    }

    pub fn session_lives(&self) -> crate::access::sessions::Lives {
        crate::access::sessions::Lives {
            idle: chrono::Duration::hours(self.session_idle_hours.unwrap_or(24).into()),
            absolute: chrono::Duration::days(self.session_max_days.unwrap_or(14).into()),
        }
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(1..=100_000).contains(&self.runs_per_minute()) {
            bail!("[auth] runs_per_minute must be between 1 and 100000");
        }
        if !(1..=3650).contains(&self.audit_keep_days.unwrap_or(90)) {
            bail!("[auth] audit_keep_days must be between 1 and 3650");
        }
        if !(1_000..=10_000_000).contains(&self.audit_max_rows()) {
            bail!("[auth] audit_max_rows must be between 1000 and 10000000");
        }
        if let Some(oidc) = &self.oidc {
            oidc.check()?;
        }
        if !(1..=720).contains(&self.session_idle_hours.unwrap_or(24))
            || !(1..=365).contains(&self.session_max_days.unwrap_or(14))
        {
            bail!(
                "[auth] session_idle_hours must be between 1 and 720, session_max_days between \
                 1 and 365"
            );
        }
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub host: Option<String>,
    pub port: Option<u16>,
    /// Seconds a client has to send a request's headers; also how long an idle connection
    /// stays open: default 10.
    pub header_timeout_secs: Option<u64>,
    /// Seconds a client has to send a request's body once its headers arrived: default 30.
    pub body_timeout_secs: Option<u64>,
    /// Connections served at once; further ones wait to be accepted: default 256.
    pub max_connections: Option<usize>,
    /// Of those, what one client address may hold; past it, a new one is answered 503 and
    /// closed: default a quarter of `max_connections`.
    pub max_connections_per_peer: Option<usize>,
    /// Seconds an answer may wait for a client that reads nothing before the connection is
    /// closed: default 10.
    pub write_timeout_secs: Option<u64>,
    /// The address people and providers reach the server at (`https://agents.example.org`),
    /// when it is not the bind: the base of printed links and of single sign-on's redirect.
    pub public_url: Option<String>,
}

impl ServerSection {
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.unwrap_or(10))
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.unwrap_or(30))
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or(256)
    }

    pub fn max_connections_per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or_else(|| self.max_connections().div_ceil(4))
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_secs(self.write_timeout_secs.unwrap_or(10))
    }

    fn check(&self) -> anyhow::Result<()> {
        if !(1..=3600).contains(&self.header_timeout().as_secs())
            || !(1..=3600).contains(&self.body_timeout().as_secs())
            || !(1..=3600).contains(&self.write_timeout().as_secs())
        {
            bail!(
                "[server] header_timeout_secs, body_timeout_secs and write_timeout_secs must be \
                 between 1 and 3600"
            );
        }
        if !(1..=65_536).contains(&self.max_connections()) {
            bail!("[server] max_connections must be between 1 and 65536");
        }
        if !(1..=self.max_connections()).contains(&self.max_connections_per_peer()) {
            bail!("[server] max_connections_per_peer must be between 1 and max_connections");
        }
        if let Some(public) = &self.public_url {
            let parsed = reqwest::Url::parse(public).ok();
            let plain = parsed.as_ref().is_some_and(|url| {
                matches!(url.scheme(), "http" | "https")
                    && url.host().is_some()
                    && url.query().is_none()
                    && url.fragment().is_none()
                    && url.username().is_empty()
            });
            if !plain {
                bail!(
                    "[server] public_url must be an http or https URL such as \
                     https://agents.example.org, got {public:?}"
                );
            }
        }
        Ok(())
    }
}

impl FileConfig {
    /// Reads `config.toml` from the data directory; a missing file is an empty config.
    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join("config.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Self::parse(&text).with_context(|| format!("invalid {}", path.display()))
    }

    /// Reads the text of a `config.toml`, every section checked.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let config: Self = toml::from_str(text)?;
        config
            .jobs
            .check()
            .and_then(|()| config.server.check())
            .and_then(|()| config.database.check())
            .and_then(|()| config.mcp.check())
            .and_then(|()| config.a2a.check())
            .and_then(|()| config.conversations.check())
            .and_then(|()| config.approvals.check())
            .and_then(|()| config.runs.check())
            .and_then(|()| config.webhooks.check())
            .and_then(|()| config.auth.check())
            .and_then(|()| config.retention.check())
            .and_then(|()| config.sandbox.check())?;
        Ok(config)
    }
}

/// `$XDG_DATA_HOME/service-runtime`, else `~/.local/share/service-runtime`.
pub fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").map(PathBuf::from)
        && xdg.is_absolute()
    {
        return Ok(xdg.join(APP_DIR));
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => {
            Ok(PathBuf::from(home).join(".local/share").join(APP_DIR))
        }
        _ => bail!("cannot find a data directory: set --data-dir, SERVICE_DATA_DIR or HOME"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_server_section_and_rejects_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        assert!(FileConfig::load(dir.path()).unwrap().server.port.is_none());
        std::fs::write(dir.path().join("config.toml"), "[server]\nport = 9000\n").unwrap();
        assert_eq!(
            FileConfig::load(dir.path()).unwrap().server.port,
            Some(9000)
        );
        std::fs::write(
            dir.path().join("config.toml"),
            "[server]\napi_key = \"sk\"\n",
        )
        .unwrap();
        let err = format!("{:#}", FileConfig::load(dir.path()).unwrap_err());
        assert!(err.contains("unknown field `api_key`"), "{err}");
    }

    #[test]
    fn reads_engine_and_tool_sections() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[engine]\nmax_iterations = 4\n[tools.web_search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:8888\"\napproval = true\n[tools.create_note]\napproval = true\n[tools.search_notes]\napproval = false\n";
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        let config = FileConfig::load(dir.path()).unwrap();
        assert_eq!(config.engine.max_iterations, Some(4));
        assert!(
            matches!(config.tools.web_search, Some(WebSearchSection::Searxng { url }) if url == "http://127.0.0.1:8888")
        );
        assert_eq!(config.tools.approval, ["create_note", "web_search"]);

        for (bad, says) in [
            (
                "[tools.create_note]\napproval = \"yes\"\n",
                "approval must be true or false",
            ),
            (
                "[tools.create_note]\napprove = true\n",
                "unknown key \"approve\"",
            ),
            (
                "[tools.web_search]\nprovider = \"bing\"\n",
                "[tools.web_search]",
            ),
            (
                "[approvals]\ntimeout_secs = 0\n",
                "timeout_secs must be between",
            ),
        ] {
            std::fs::write(dir.path().join("config.toml"), bad).unwrap();
            let error = format!("{:#}", FileConfig::load(dir.path()).unwrap_err());
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
