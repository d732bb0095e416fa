//! Which tool names a profile may list, and which of those it lists cannot be used right now.
//!
//! A name must be a registered tool, with two exceptions: a tool a featured bundle recommends
//! that comes from something not loaded here (an adapter, a config section), and a name (or
//! `prefix__*` wildcard) under a configured source such as an MCP server, whose tools come and
//! go with its connection. Installing Atlas keeps its calendar tools; they are shown as
//! unavailable, with the reason, until whatever provides them is loaded.

use serde::Serialize;
use service_contract::ToolRegistry;

use super::store;
use crate::error::{Error, Result};

/// Where the tools that featured bundles recommend, but this server may lack, come from.
const PROVIDED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "web_search",
        "offered once [tools.web_search] is set in config.toml",
    ),
    (
        "list_calendar_events_today",
        "comes from the calendar adapter, which is not loaded",
    ),
    (
        "create_calendar_event",
        "comes from the calendar adapter, which is not loaded",
    ),
];

const NOT_LOADED: &str = "it is not registered: the adapter that provides it is not loaded";

/// A listed tool an agent cannot use at the moment, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Unavailable {
    pub name: String,
    pub reason: String,
}

fn recommended_by_a_bundle(name: &str) -> bool {
    store::bundles().iter().any(|bundle| {
        bundle
            .recommended_tools
            .iter()
            .flatten()
            .any(|tool| tool == name)
    })
}

/// Refuses names that are neither registered nor recommended by a featured bundle (400 on
/// `tools`, naming every unknown one).
pub fn check_known(names: &[String], registry: &ToolRegistry) -> Result<()> {
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|name| !registry.knows(name) && !recommended_by_a_bundle(name))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let (noun, list) = match unknown.as_slice() {
        [one] => ("tool", format!("{one:?}")),
        many => ("tools", format!("{many:?}")),
    };
    Err(Error::field(
        "tools",
        format!("unknown {noun} {list}; GET /api/tools lists the registered ones"),
    ))
}

/// The listed tools that cannot be used now: not registered, or gated and not switched on
/// (`gate_open` says whether a gate variable is `true`).
pub fn unavailable(
    listed: Option<&[String]>,
    registry: &ToolRegistry,
    gate_open: impl Fn(&str) -> bool,
) -> Vec<Unavailable> {
    listed
        .into_iter()
        .flatten()
        .filter_map(|name| {
            let reason = if let Some(tools) = registry.expand(name) {
                if !tools.is_empty() {
                    return None;
                }
                match registry.source_of(name) {
                    Some(source) => format!("{source} offers no tool yet"),
                    None => "no registered tool matches it".to_owned(),
                }
            } else if !registry.contains(name) {
                match registry.source_of(name) {
                    Some(source) => format!("{source} does not offer it now"),
                    None => PROVIDED_ELSEWHERE
                        .iter()
                        .find(|(tool, _)| tool == name)
                        .map_or(NOT_LOADED, |(_, reason)| reason)
                        .to_owned(),
                }
            } else {
                let gate = registry.gate_of(name).filter(|gate| !gate_open(gate))?;
                format!("switched off until {gate}=true")
            };
            Some(Unavailable {
                name: name.clone(),
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_contract::Tool;

    use super::*;

    fn registry() -> ToolRegistry {
        let registry = ToolRegistry::new();
        let tool = |name: &str| {
            Tool::new(name, name, json!({"type": "object"}), |_, _| async {
                Ok(String::new())
            })
        };
        registry.register(tool("search_notes"), false).unwrap();
        let mut shell = tool("shell_exec");
        shell.gate = Some("SVC_GATE");
        registry.register(shell, false).unwrap();
        registry
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn unknown_names_are_refused_except_bundle_tools_from_elsewhere() {
        let registry = registry();
        check_known(
            &names(&["search_notes", "shell_exec", "create_calendar_event"]),
            &registry,
        )
        .unwrap();
        let err =
            check_known(&names(&["nope", "search_notes", "teleport"]), &registry).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown tools [\"nope\", \"teleport\"]; GET /api/tools lists the registered ones"
        );
        assert!(matches!(err, Error::InvalidField { field: "tools", .. }));
    }

    #[test]
    fn unavailable_tools_say_why() {
        let registry = registry();
        let listed = names(&["search_notes", "web_search", "shell_exec"]);
        let found = unavailable(Some(&listed), &registry, |_| false);
        assert_eq!(
            found,
            [
                Unavailable {
                    name: "web_search".into(),
                    reason: "offered once [tools.web_search] is set in config.toml".into()
                },
                Unavailable {
                    name: "shell_exec".into(),
                    reason: "switched off until SVC_GATE=true".into()
                }
            ]
        );
        assert_eq!(
            unavailable(Some(&listed[..2]), &registry, |_| true).len(),
            1
        );
        assert!(unavailable(None, &registry, |_| false).is_empty());
    }

    #[test]
    fn the_reasons_are_for_tools_a_bundle_recommends() {
        for (tool, _) in PROVIDED_ELSEWHERE {
            assert!(recommended_by_a_bundle(tool), "{tool}");
        }
    }
}
