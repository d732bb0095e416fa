//! `[a2a]` in `config.toml`: remote agents reached over the Agent2Agent protocol, whose skills
//! agents here may call as tools. As for MCP servers, a header holding a credential names it
//! (`{{secret:NAME}}`), filled from the environment when the agent is called.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::mcp::settings::{check_http, check_name, setup_timeout, timeout};

/// How long a call of a remote agent may take unless `[a2a] call_timeout_secs` says otherwise:
/// agents think longer than tools answer.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long fetching a card may take unless `[a2a] card_timeout_secs` says otherwise.
const DEFAULT_CARD_TIMEOUT: Duration = Duration::from_secs(10);
/// Where a card is under an agent's base URL (the specification's well-known path).
const WELL_KNOWN_CARD: &str = ".well-known/agent-card.json";

/// `[a2a]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSection {
    /// Seconds one call of a remote agent may take (1 to 3600): default 120.
    pub call_timeout_secs: Option<u64>,
    /// Seconds fetching a remote agent's card may take (1 to 600): default 10.
    pub card_timeout_secs: Option<u64>,
    /// `[a2a.agents.<name>]`.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentEntry>,
}

/// One remote agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// The agent's base URL (its card is at `<url>/.well-known/agent-card.json`), or its
    /// card's own URL (one ending in `.json`).
    pub url: String,
    /// Request headers; values may hold `{{secret:NAME}}` and `{{basic:USER:PASSWORD}}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Overrides `[a2a] call_timeout_secs` for this agent.
    pub timeout_secs: Option<u64>,
}

/// A checked entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub name: String,
    /// Where its card is.
    pub card_url: reqwest::Url,
    pub headers: BTreeMap<String, String>,
    pub call_timeout: Duration,
}

impl A2aSection {
    /// Checks everything, for the start-up.
    pub fn check(&self) -> anyhow::Result<()> {
        self.remotes()?;
        self.card_timeout()?;
        Ok(())
    }

    pub fn card_timeout(&self) -> anyhow::Result<Duration> {
        setup_timeout(
            "[a2a] card_timeout_secs",
            self.card_timeout_secs,
            DEFAULT_CARD_TIMEOUT,
        )
    }

    /// The remote agents, checked: a start-up error names the entry and what is wrong.
    pub fn remotes(&self) -> anyhow::Result<Vec<Remote>> {
        let default_timeout = timeout("[a2a] call_timeout_secs", self.call_timeout_secs)?
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        self.agents
            .iter()
            .map(|(name, entry)| {
                let at = format!("[a2a.agents.{name}]");
                check_name(name).map_err(|e| anyhow::anyhow!("{at}: {e}"))?;
                let url = check_http(&at, &entry.url, &entry.headers)?;
                let call_timeout = timeout(&format!("{at} timeout_secs"), entry.timeout_secs)?
                    .unwrap_or(default_timeout);
                Ok(Remote {
                    name: name.clone(),
                    card_url: card_url(url)?,
                    headers: entry.headers.clone(),
                    call_timeout,
                })
            })
            .collect()
    }
}

/// The card's URL: `url` itself when it names a `.json` file, else the well-known path under
/// it.
fn card_url(url: reqwest::Url) -> anyhow::Result<reqwest::Url> {
    if url.path().ends_with(".json") {
        return Ok(url);
    }
    let mut base = url;
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    Ok(base.join(WELL_KNOWN_CARD)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<Remote>> {
        let section: A2aSection = toml::from_str(text)?;
        section.check()?;
        section.remotes()
    }

    #[test]
    fn reads_agents_and_where_their_cards_are() {
        let remotes = parse(
            r#"
            call_timeout_secs = 30
            [agents.research]
            url = "https://agents.example.com/research"
            headers = { Authorization = "Bearer {{secret:RESEARCH_TOKEN}}" }
            [agents.local]
            url = "http://127.0.0.1:9000/"
            timeout_secs = 5
            [agents.named]
            url = "https://example.com/cards/writer.json"
            "#,
        )
        .unwrap();
        let cards: Vec<&str> = remotes.iter().map(|r| r.card_url.as_str()).collect();
        assert_eq!(
            cards,
            [
                "http://127.0.0.1:9000/.well-known/agent-card.json",
                "https://example.com/cards/writer.json",
                "https://agents.example.com/research/.well-known/agent-card.json",
            ]
        );
        assert_eq!(remotes[0].call_timeout, Duration::from_secs(5));
        assert_eq!(remotes[2].call_timeout, Duration::from_secs(30));
    }

    #[test]
    fn refuses_entries_that_are_not_one_agent() {
        let error = |text: &str| format!("{:#}", parse(text).unwrap_err());
        assert!(error("[agents.a]\n").contains("missing field `url`"));
        assert!(error("[agents.a]\nurl = \"ftp://h\"\n").contains("http:// or https://"));
        assert!(error("[agents.a__b]\nurl = \"http://h\"\n").contains("single '_'"));
        assert!(
            error("[agents.a]\nurl = \"http://h\"\nheaders = { Authorization = \"Bearer x\" }\n")
                .contains("never holds one")
        );
        assert!(error("[agents.a]\nurl = \"http://h\"\ntimeout_secs = 0\n").contains("between 1"));
        assert!(error("card_timeout_secs = 601\n").contains("between 1 and 600"));
        assert!(
            error("[agents.a]\nurl = \"http://h\"\ncommand = \"x\"\n").contains("unknown field")
        );
    }
}
