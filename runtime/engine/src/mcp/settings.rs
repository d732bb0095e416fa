//! `[mcp]` and `[mcp_server]` in `config.toml`: the MCP servers whose tools agents may use, and
//! what this runtime serves over MCP besides its agents. Values that are secrets are never
//! written here: `{{secret:NAME}}` in a header or an environment value names a variable of the
//! environment (or `.env`), filled in when the server is reached.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, ensure};
use serde::Deserialize;

use crate::placeholders;

/// How long a tool call may take unless `[mcp] call_timeout_secs` says otherwise.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to answer its handshake unless `[mcp] connect_timeout_secs`
/// says otherwise.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest server (or remote agent) name: `mcp__<server>__<tool>` must stay a short tool
/// name.
pub(crate) const MAX_SERVER_NAME: usize = 24;

/// `[mcp]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// Seconds one tool call may take (1 to 3600): default 60.
    pub call_timeout_secs: Option<u64>,
    /// Seconds a server may take to answer its handshake (1 to 600): default 30.
    pub connect_timeout_secs: Option<u64>,
    /// `[mcp.servers.<name>]`.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerEntry>,
}

/// One MCP server: a command speaking MCP over its stdin and stdout, or a Streamable HTTP URL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The program and its arguments (no shell): a list, or the program alone with `args`,
    /// as desktop and editor clients write their `mcpServers`.
    pub command: Option<CommandLine>,
    /// The program's arguments, with `command` given as the program alone.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables the program gets besides `PATH`, `HOME`, `USER`, `LANG`, `LC_ALL` and
    /// `TMPDIR`; values may hold `{{secret:NAME}}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    /// Request headers; values may hold `{{secret:NAME}}` and `{{basic:USER:PASSWORD}}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Overrides `[mcp] call_timeout_secs` for this server.
    pub timeout_secs: Option<u64>,
}

/// `command = ["npx", "-y", "server"]`, or `command = "npx"` beside `args = ["-y", "server"]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "a program name, or a list of a program and its arguments"
)]
pub enum CommandLine {
    Program(String),
    Words(Vec<String>),
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        program: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }
}

/// A checked server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub transport: Transport,
    pub call_timeout: Duration,
}

/// `[mcp_server]`: what `/mcp` and `service-runtime mcp` offer besides one tool per agent.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSection {
    /// Registered tools to offer as they are; none by default, gated ones never.
    #[serde(default)]
    pub tools: Vec<String>,
}

impl McpSection {
    /// Checks everything, for the start-up.
    pub fn check(&self) -> anyhow::Result<()> {
        self.servers()?;
        self.connect_timeout()?;
        Ok(())
    }

    pub fn connect_timeout(&self) -> anyhow::Result<Duration> {
        setup_timeout(
            "[mcp] connect_timeout_secs",
            self.connect_timeout_secs,
            DEFAULT_CONNECT_TIMEOUT,
        )
    }

    /// The servers, checked: a start-up error names the entry and what is wrong with it.
    pub fn servers(&self) -> anyhow::Result<Vec<Server>> {
        let default_timeout = timeout("[mcp] call_timeout_secs", self.call_timeout_secs)?
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        self.servers
            .iter()
            .map(|(name, entry)| {
                let at = format!("[mcp.servers.{name}]");
                check_name(name).map_err(|e| anyhow::anyhow!("{at}: {e}"))?;
                let transport = entry.transport(&at)?;
                let call_timeout = timeout(&format!("{at} timeout_secs"), entry.timeout_secs)?
                    .unwrap_or(default_timeout);
                Ok(Server {
                    name: name.clone(),
                    transport,
                    call_timeout,
                })
            })
            .collect()
    }
}

/// A time to set something up (a handshake, reading a card): 1 to 600 seconds, else `default`.
pub(crate) fn setup_timeout(
    key: &str,
    secs: Option<u64>,
    default: Duration,
) -> anyhow::Result<Duration> {
    match secs {
        Some(secs) if !(1..=600).contains(&secs) => bail!("{key} must be between 1 and 600"),
        secs => Ok(secs.map_or(default, Duration::from_secs)),
    }
}

pub(crate) fn timeout(key: &str, secs: Option<u64>) -> anyhow::Result<Option<Duration>> {
    match secs {
        Some(secs) if !(1..=3600).contains(&secs) => bail!("{key} must be between 1 and 3600"),
        secs => Ok(secs.map(Duration::from_secs)),
    }
}

/// Letters, digits, `-` and single `_`, so `mcp__<server>__<tool>` (and `a2a__<agent>__<skill>`)
/// reads one way.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if name.is_empty() || name.len() > MAX_SERVER_NAME || !chars_ok || name.contains("__") {
        return Err(format!(
            "a name is 1 to {MAX_SERVER_NAME} letters, digits, '-' or single '_'"
        ));
    }
    Ok(())
}

impl ServerEntry {
    fn transport(&self, at: &str) -> anyhow::Result<Transport> {
        match (&self.command, &self.url) {
            (Some(command), None) => {
                ensure!(
                    self.headers.is_empty(),
                    "{at}: headers are for a url; a command gets env"
                );
                let words: Vec<String> = match command {
                    CommandLine::Program(program) => std::iter::once(program)
                        .chain(&self.args)
                        .cloned()
                        .collect(),
                    CommandLine::Words(words) => {
                        ensure!(
                            self.args.is_empty(),
                            "{at}: args go with a command given as the program alone; a \
                             command list holds its arguments"
                        );
                        words.clone()
                    }
                };
                let Some((program, args)) = words.split_first() else {
                    bail!("{at}: command must name a program");
                };
                ensure!(
                    !program.trim().is_empty(),
                    "{at}: command must name a program"
                );
                for (variable, value) in &self.env {
                    ensure!(
                        !variable.is_empty() && !variable.contains(['=', '\0']),
                        "{at}: {variable:?} is not an environment variable name"
                    );
                    check_value(at, variable, value)?;
                }
                Ok(Transport::Stdio {
                    program: program.clone(),
                    args: args.to_vec(),
                    env: self.env.clone(),
                })
            }
            (None, Some(url)) => {
                ensure!(
                    self.env.is_empty() && self.args.is_empty(),
                    "{at}: env and args are for a command; a url gets headers"
                );
                check_http(at, url, &self.headers)?;
                Ok(Transport::Http {
                    url: url.clone(),
                    headers: self.headers.clone(),
                })
            }
            _ => bail!("{at} needs exactly one of command (a program run over stdio) or url"),
        }
    }
}

/// An http(s) `url` with request `headers` whose credentials are placeholders: the URL.
pub(crate) fn check_http(
    at: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
) -> anyhow::Result<reqwest::Url> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| anyhow::anyhow!("{at}: url {url:?} is not a URL: {e}"))?;
    ensure!(
        matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some(),
        "{at}: url must be an http:// or https:// address"
    );
    for (name, value) in headers {
        ensure!(
            http::HeaderName::try_from(name.as_str()).is_ok(),
            "{at}: {name:?} is not a header name"
        );
        check_value(at, name, value)?;
    }
    Ok(parsed)
}

/// A value that names a credential must come from the environment, so `config.toml` never
/// holds one; malformed placeholders are refused here rather than at every connection.
fn check_value(at: &str, name: &str, value: &str) -> anyhow::Result<()> {
    ensure!(
        !super::import::is_credential(name) || placeholders::has_placeholder(value),
        "{at}: {name} looks like a credential; config.toml never holds one: write \
         {{{{secret:NAME}}}} and set NAME in the environment or .env"
    );
    placeholders::fill(value, |_| Ok::<_, String>(String::new()), str::to_owned)
        .map_err(|e| anyhow::anyhow!("{at}: {name}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<Server>> {
        let section: McpSection = toml::from_str(text)?;
        section.servers()
    }

    #[test]
    fn reads_stdio_and_http_servers() {
        let servers = parse(
            r#"
            call_timeout_secs = 30
            [servers.files]
            command = ["npx", "-y", "files-server", "/srv"]
            env = { LOG_LEVEL = "warn" }
            [servers.issues]
            url = "https://mcp.example.com/mcp"
            headers = { Authorization = "Bearer {{secret:ISSUES_TOKEN}}" }
            timeout_secs = 5
            "#,
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "files");
        assert_eq!(servers[0].call_timeout, Duration::from_secs(30));
        assert!(
            matches!(&servers[0].transport, Transport::Stdio { program, args, .. } if program == "npx" && args.len() == 3)
        );
        assert_eq!(servers[1].transport.kind(), "http");
        assert_eq!(servers[1].call_timeout, Duration::from_secs(5));
    }

    #[test]
    fn reads_a_command_with_args_as_clients_write_it() {
        let servers = parse(
            "[servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"files-server\"]\n\
             [servers.bare]\ncommand = \"files-server\"\n",
        )
        .unwrap();
        let stdio = |server: &Server| match &server.transport {
            Transport::Stdio { program, args, .. } => (program.clone(), args.clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            stdio(&servers[0]),
            ("files-server".into(), Vec::<String>::new())
        );
        assert_eq!(
            stdio(&servers[1]),
            (
                "npx".into(),
                vec!["-y".to_owned(), "files-server".to_owned()]
            )
        );
        let error = |text: &str| format!("{:#}", parse(text).unwrap_err());
        assert!(
            error("[servers.a]\ncommand = [\"npx\"]\nargs = [\"-y\"]\n").contains("args go with")
        );
        assert!(error("[servers.a]\ncommand = 7\n").contains("a program name, or a list"));
        assert!(
            error("[servers.a]\nurl = \"http://h/mcp\"\nargs = [\"x\"]\n")
                .contains("args are for a command")
        );
    }

    #[test]
    fn refuses_entries_that_are_not_one_server() {
        let error = |text: &str| format!("{:#}", parse(text).unwrap_err());
        assert!(
            error("[servers.a]\ncommand = [\"x\"]\nurl = \"http://h/mcp\"\n")
                .contains("[mcp.servers.a] needs exactly one of command")
        );
        assert!(error("[servers.a]\nenv = {}\n").contains("needs exactly one"));
        assert!(error("[servers.a]\ncomand = [\"x\"]\n").contains("unknown field `comand`"));
        assert!(error("[servers.a]\ncommand = []\n").contains("must name a program"));
        assert!(error("[servers.a__b]\ncommand = [\"x\"]\n").contains("single '_'"));
        assert!(error("[servers.a]\nurl = \"ftp://h\"\n").contains("http:// or https://"));
        assert!(
            error(
                "[servers.a]\nurl = \"http://h\"\nheaders = { Authorization = \"Bearer sk-1\" }\n"
            )
            .contains("never holds one")
        );
        assert!(
            error("[servers.a]\nurl = \"http://h\"\nheaders = { X = \"{{secret:A\" }\n")
                .contains("unterminated")
        );
        assert!(error("[servers.a]\ncommand = [\"x\"]\ntimeout_secs = 0\n").contains("between 1"));
    }
}
