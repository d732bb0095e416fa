//! `web_search`: a SearXNG instance or the Brave Search API, as `[tools.web_search]` says.
//! Without that section the tool is not registered, so models are never offered it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::WebSearchSection;
use crate::net::{self, GuardedClient};
use crate::settings_store::SettingsStore;
use service_contract::tools::{RegistryError, Tool, ToolRegistry, args};

const BRAVE_BASE: &str = "https://api.search.brave.com";
pub(crate) const BRAVE_KEY: &str = "BRAVE_SEARCH_API_KEY";
const MAX_RESPONSE: usize = 2 * 1024 * 1024;

#[derive(Deserialize)]
struct Search {
    query: String,
    count: Option<u32>,
}

/// `(title, url, snippet)` of each result, from either backend's JSON.
fn results(value: &Value, count: usize) -> Vec<Value> {
    let items = value["results"]
        .as_array()
        .or_else(|| value["web"]["results"].as_array());
    items
        .into_iter()
        .flatten()
        .take(count)
        .map(|r| {
            let snippet = r["content"]
                .as_str()
                .or_else(|| r["description"].as_str())
                .unwrap_or_default();
            json!({"title": r["title"], "url": r["url"], "snippet": snippet})
        })
        .collect()
}

async fn search(
    config: &WebSearchSection,
    search: Search,
    env: &SettingsStore,
) -> Result<String, String> {
    let count = search.count.unwrap_or(5).clamp(1, 10);
    let (base, trusted) = match config {
        WebSearchSection::Searxng { url } => (url.clone(), net::host_of(url)),
        WebSearchSection::Brave { url } => (
            url.clone().unwrap_or_else(|| BRAVE_BASE.into()),
            url.as_deref().and_then(net::host_of),
        ),
    };
    let client = GuardedClient::new(trusted, Duration::from_secs(20)).map_err(|e| e.to_string())?;
    let base = base.trim_end_matches('/');
    let request = match config {
        WebSearchSection::Searxng { .. } => client
            .get(&format!("{base}/search"))?
            .query(&[("q", search.query.as_str()), ("format", "json")]),
        WebSearchSection::Brave { .. } => {
            let key = env
                .get(BRAVE_KEY)
                .ok_or_else(|| format!("web search is not configured: {BRAVE_KEY} is not set"))?;
            client
                .get(&format!("{base}/res/v1/web/search"))?
                .query(&[("q", search.query.as_str()), ("count", &count.to_string())])
                .header("x-subscription-token", key)
                .header("accept", "application/json")
        }
    };
    let response = request.send().await.map_err(net::describe)?;
    if !response.status().is_success() {
        return Err(format!(
            "the search service answered HTTP {}",
            response.status()
        ));
    }
    let body = net::body_capped(response, MAX_RESPONSE).await?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("the search service sent invalid JSON: {e}"))?;
    Ok(json!({ "results": results(&value, count as usize) }).to_string())
}

pub(super) fn register(
    registry: &ToolRegistry,
    config: WebSearchSection,
    env: Arc<SettingsStore>,
) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "web_search",
            "Searches the web and returns the top results with title, URL and snippet.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "count": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Number of results (default 5)"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            move |input, _| {
                let (config, env) = (config.clone(), Arc::clone(&env));
                async move { search(&config, args(input)?, &env).await }
            },
        ),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_backends() {
        let searx = json!({"results": [{"title": "A", "url": "https://a", "content": "about a"}]});
        assert_eq!(results(&searx, 5)[0]["snippet"], "about a");
        let brave = json!({"web": {"results": [{"title": "B", "url": "https://b", "description": "about b"}, {"title": "C"}]}});
        assert_eq!(results(&brave, 1).len(), 1);
        assert_eq!(results(&brave, 5)[0]["url"], "https://b");
    }
}
