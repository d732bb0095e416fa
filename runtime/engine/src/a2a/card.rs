//! A remote agent's card, as far as calling it needs: its JSON-RPC endpoint (A2A 1.x), whether
//! it streams, and its skills. A card is checked before anything of it is used.

use serde_json::Value;

use crate::mcp::tools::MAX_DESCRIPTION_CHARS;

/// A larger card is refused.
pub(crate) const MAX_CARD_BYTES: usize = 256 << 10;
/// Skills offered as tools per agent; more are skipped (and named on its status).
pub(crate) const MAX_SKILLS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Card {
    /// Its name and version, as it gives them.
    pub(crate) agent: String,
    pub(crate) endpoint: reqwest::Url,
    pub(crate) streaming: bool,
    pub(crate) skills: Vec<Skill>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skill {
    pub(crate) id: String,
    /// What the model reads: the agent's name, the skill's description and its examples.
    pub(crate) description: String,
}

/// Reads the card fetched from `from`; why it cannot be used otherwise.
pub(crate) fn read(body: &[u8], from: &reqwest::Url) -> Result<Card, String> {
    let card: Value =
        serde_json::from_slice(body).map_err(|e| format!("the card is not JSON: {e}"))?;
    let name = card["name"]
        .as_str()
        .filter(|name| !name.trim().is_empty())
        .ok_or("the card has no name")?;
    let endpoint = endpoint(&card, from)?;
    let version = card["version"].as_str().unwrap_or_default();
    let summary = card["description"].as_str().unwrap_or_default();
    let skills = card["skills"]
        .as_array()
        .ok_or("the card lists no skills")?
        .iter()
        .map(|skill| {
            let id = skill["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .ok_or("a skill has no id")?;
            Ok(Skill {
                id: id.to_owned(),
                description: describe(name, summary, skill),
            })
        })
        .collect::<Result<_, &str>>()?;
    Ok(Card {
        agent: format!("{name} {version}").trim_end().to_owned(),
        endpoint,
        streaming: card["capabilities"]["streaming"] == true,
        skills,
    })
}

/// The first JSON-RPC interface of A2A 1.x. It must be where the card came from: the entry's
/// headers (its credentials) are sent there, and a card must not send them elsewhere.
fn endpoint(card: &Value, from: &reqwest::Url) -> Result<reqwest::Url, String> {
    let interfaces = card["supportedInterfaces"].as_array();
    let Some(interface) = interfaces.into_iter().flatten().find(|interface| {
        interface["protocolBinding"].as_str() == Some("JSONRPC")
            && interface["protocolVersion"]
                .as_str()
                .is_none_or(|version| version.starts_with("1."))
    }) else {
        return Err(match card["protocolVersion"].as_str() {
            // Cards before 1.0 named the version at the top.
            Some(old) => format!("the card is of A2A {old}; this runtime speaks A2A 1.x"),
            None => "the card offers no JSON-RPC interface of A2A 1.x".to_owned(),
        });
    };
    let url = interface["url"]
        .as_str()
        .and_then(|url| reqwest::Url::parse(url).ok())
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or("the card's JSON-RPC interface has no http(s) url")?;
    if url.origin() != from.origin() {
        return Err(format!(
            "the card's endpoint {url} is not on {}, where the card is: the entry's headers are \
             sent only there",
            from.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

fn describe(agent: &str, summary: &str, skill: &Value) -> String {
    let what = skill["description"]
        .as_str()
        .or(skill["name"].as_str())
        .unwrap_or(summary);
    let mut text = format!("Ask the agent {agent}: {what}");
    let examples: Vec<&str> = skill["examples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !examples.is_empty() {
        text.push_str(&format!(" Examples: {}", examples.join("; ")));
    }
    text.chars().take(MAX_DESCRIPTION_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn from() -> reqwest::Url {
        "http://agents.example.com/.well-known/agent-card.json"
            .parse()
            .unwrap()
    }

    fn card(interfaces: Value) -> Value {
        json!({
            "name": "helper",
            "version": "2.1",
            "description": "Helps.",
            "supportedInterfaces": interfaces,
            "capabilities": {"streaming": true},
            "skills": [
                {"id": "echo", "name": "Echo", "description": "Says it back.", "examples": ["hi", "ho"]},
                {"id": "plain", "name": "Plain"},
            ],
        })
    }

    fn read_json(card: &Value) -> Result<Card, String> {
        read(card.to_string().as_bytes(), &from())
    }

    #[test]
    fn reads_the_json_rpc_interface_and_the_skills() {
        let card = read_json(&card(json!([
            {"url": "http://agents.example.com/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://agents.example.com/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ])))
        .unwrap();
        assert_eq!(card.agent, "helper 2.1");
        assert_eq!(card.endpoint.as_str(), "http://agents.example.com/rpc");
        assert!(card.streaming);
        assert_eq!(card.skills[0].id, "echo");
        assert_eq!(
            card.skills[0].description,
            "Ask the agent helper: Says it back. Examples: hi; ho"
        );
        assert_eq!(card.skills[1].description, "Ask the agent helper: Plain");
    }

    #[test]
    fn refuses_cards_it_cannot_call_or_that_send_credentials_elsewhere() {
        let refused = |card: Value| read_json(&card).unwrap_err();
        assert!(refused(json!([1])).contains("no name"));
        assert!(
            refused(card(json!([
                {"url": "https://elsewhere.example.net/", "protocolBinding": "JSONRPC"}
            ])))
            .contains("is not on http://agents.example.com")
        );
        assert!(
            refused(card(json!([
                {"url": "http://agents.example.com/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ])))
            .contains("no JSON-RPC interface of A2A 1.x")
        );
        let old = json!({"name": "x", "url": "http://agents.example.com/", "protocolVersion": "0.3.0", "skills": []});
        assert!(refused(old).contains("the card is of A2A 0.3.0"));
        assert!(read(b"<html>", &from()).unwrap_err().contains("not JSON"));
    }
}
