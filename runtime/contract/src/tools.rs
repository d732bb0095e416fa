//! The tool registry (spec 2.7): tools by unique name, with a model-facing description, a JSON
//! Schema for their input, and a handler. Inputs are checked against the schema before the
//! handler runs; an invalid call becomes a tool error the model can read and correct. The
//! server's built-in tools, adapters and wasm components all register here.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRunner, Parent};

/// A tool as the model sees it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// Its input's JSON Schema.
    pub parameters: Value,
}

/// What a handler gets besides the model's input. Anything else a tool needs (a database,
/// a folder) it captures when it is registered.
#[derive(Clone)]
pub struct ToolContext {
    /// Runs agents, for tools that delegate.
    pub agents: Arc<dyn AgentRunner>,
    /// The agent run that called the tool (its trace, depth and budget); `None` when a
    /// component calls it outside any run.
    pub run: Option<Parent>,
    pub cancel: CancellationToken,
}

/// A tool's implementation. Errors are plain text for the model to read.
pub trait ToolHandler: Send + Sync {
    fn call(&self, input: Value, ctx: ToolContext) -> BoxFuture<'static, Result<String, String>>;
}

impl<F, Fut> ToolHandler for F
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    fn call(&self, input: Value, ctx: ToolContext) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(self(input, ctx))
    }
}

pub struct Tool {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub parameters: Value,
    /// `None`: listed for the model but answers with an error when called.
    pub handler: Option<Arc<dyn ToolHandler>>,
    /// A tool with a gate is never inherited: a profile must name it, and this environment
    /// variable must be `true`.
    pub gate: Option<&'static str>,
    /// Whether it runs agents (delegation): a component needs the `agent` grant to call it,
    /// and the call counts against its agent limits.
    pub runs_agents: bool,
    /// Whether it writes what the user keeps (notes): a component's grant must name it, as
    /// `tools = ["*"]` covers only tools that leave stored data alone.
    pub writes: bool,
    /// Whether only profiles and grants that name it get it (an MCP server's tools, which can
    /// do anything): never inherited by a profile whose list is unset, nor covered by `*`.
    pub named_only: bool,
}

impl Tool {
    pub fn new(
        name: &str,
        description: &str,
        parameters: Value,
        handler: impl ToolHandler + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            handler: Some(Arc::new(handler)),
            gate: None,
            runs_agents: false,
            writes: false,
            named_only: false,
        }
    }

    /// Marks a tool that runs agents.
    pub fn running_agents(mut self) -> Self {
        self.runs_agents = true;
        self
    }

    /// Marks a tool that writes stored data.
    pub fn writing(mut self) -> Self {
        self.writes = true;
        self
    }

    /// Marks a tool that only those who name it get.
    pub fn named_only(mut self) -> Self {
        self.named_only = true;
        self
    }
}

struct Registered {
    tool: Tool,
    validator: jsonschema::Validator,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named {0:?} is already registered (register with replace to swap it)")]
    Duplicate(String),
    #[error("tool {name:?} has an invalid parameter schema: {reason}")]
    InvalidSchema { name: String, reason: String },
    #[error("tool name {0:?} is not valid: use letters, digits, '_', '-' or '.'")]
    InvalidName(String),
}

/// A tool as listings show it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub gated: bool,
    pub has_handler: bool,
    /// Offered only to profiles and grants that name it.
    pub named_only: bool,
}

/// A listed name ending in this matches every tool whose name starts with what precedes it
/// (`mcp__files__*`).
pub const WILDCARD_SUFFIX: &str = "__*";

#[derive(Default)]
pub struct ToolRegistry {
    tools: RwLock<BTreeMap<String, Arc<Registered>>>,
    /// Name prefixes whose tools come and go with something configured (an MCP server's
    /// `mcp__<server>__`): names under them are known even while none is registered.
    sources: RwLock<BTreeMap<String, String>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. An existing name fails unless `replace` is set.
    pub fn register(&self, tool: Tool, replace: bool) -> Result<(), RegistryError> {
        let valid_name = !tool.name.is_empty()
            && tool.name.len() <= 64
            && tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(RegistryError::InvalidName(tool.name));
        }
        let validator = jsonschema::validator_for(&tool.parameters).map_err(|e| {
            RegistryError::InvalidSchema {
                name: tool.name.clone(),
                reason: e.to_string(),
            }
        })?;
        let mut tools = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        if !replace && tools.contains_key(&tool.name) {
            return Err(RegistryError::Duplicate(tool.name));
        }
        tools.insert(tool.name.clone(), Arc::new(Registered { tool, validator }));
        Ok(())
    }

    /// Removes a tool; returns whether it was there.
    pub fn unregister(&self, name: &str) -> bool {
        self.tools
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .is_some()
    }

    fn get(&self, name: &str) -> Option<Arc<Registered>> {
        self.tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Whether a tool of this name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The gate variable of a registered tool that has one.
    pub fn gate_of(&self, name: &str) -> Option<&'static str> {
        self.get(name).and_then(|r| r.tool.gate)
    }

    /// Whether a registered tool runs agents.
    pub fn runs_agents(&self, name: &str) -> bool {
        self.get(name).is_some_and(|r| r.tool.runs_agents)
    }

    /// Whether a registered tool writes stored data.
    pub fn writes(&self, name: &str) -> bool {
        self.get(name).is_some_and(|r| r.tool.writes)
    }

    /// Whether a registered tool is offered only to those who name it.
    pub fn named_only(&self, name: &str) -> bool {
        self.get(name).is_some_and(|r| r.tool.named_only)
    }

    /// Declares that tools named `prefix...` come from `source` (a description such as
    /// `the MCP server "files"`), so profiles may list them, and `prefix*`, while none is
    /// registered.
    pub fn add_source(&self, prefix: &str, source: &str) {
        self.sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(prefix.to_owned(), source.to_owned());
    }

    /// What provides tools named like `name` (or the wildcard `name`), when a source does.
    pub fn source_of(&self, name: &str) -> Option<String> {
        let name = name.strip_suffix('*').unwrap_or(name);
        self.sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix.as_str()))
            .map(|(_, source)| source.clone())
    }

    /// Whether a profile may list `name`: a registered tool, a wildcard or a name under a
    /// declared source.
    pub fn knows(&self, name: &str) -> bool {
        self.contains(name) || self.source_of(name).is_some()
    }

    /// The registered tools a wildcard entry (`mcp__files__*`) stands for; `None` when `name`
    /// is not a wildcard.
    pub fn expand(&self, name: &str) -> Option<Vec<String>> {
        let prefix = wildcard_prefix(name)?;
        let tools = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        Some(named_under(&tools, prefix).cloned().collect())
    }

    pub fn list(&self) -> Vec<ToolInfo> {
        let tools = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        tools
            .values()
            .map(|r| ToolInfo {
                name: r.tool.name.clone(),
                description: r.tool.description.clone(),
                parameters: r.tool.parameters.clone(),
                gated: r.tool.gate.is_some(),
                has_handler: r.tool.handler.is_some(),
                named_only: r.tool.named_only,
            })
            .collect()
    }

    /// The tools a profile may use, and warnings about names it lists that cannot be used.
    /// `None` (unset) is every tool that is neither gated nor named-only; a list, even an
    /// empty one, is exactly that list, where `prefix__*` stands for every tool so named.
    /// `gate_open` says whether a gate variable is set to `true`.
    pub fn allowed(
        &self,
        listed: Option<&[String]>,
        gate_open: impl Fn(&str) -> bool,
    ) -> (Vec<ToolSpec>, Vec<String>) {
        let tools = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let spec = |r: &Registered| ToolSpec {
            name: r.tool.name.clone(),
            description: r.tool.description.clone(),
            parameters: r.tool.parameters.clone(),
        };
        let Some(listed) = listed else {
            let specs = tools
                .values()
                .filter(|r| r.tool.gate.is_none() && !r.tool.named_only)
                .map(|r| spec(r))
                .collect();
            return (specs, Vec::new());
        };
        let mut specs: Vec<ToolSpec> = Vec::new();
        let mut warnings = Vec::new();
        let mut names = Vec::new();
        for name in listed {
            match wildcard_prefix(name) {
                Some(prefix) => {
                    let before = names.len();
                    names.extend(named_under(&tools, prefix));
                    if names.len() == before {
                        warnings.push(format!("no registered tool matches {name:?}"));
                    }
                }
                None => names.push(name),
            }
        }
        for name in names {
            if specs.iter().any(|s| &s.name == name) {
                continue;
            }
            match tools.get(name) {
                None => warnings.push(format!("tool {name:?} is not registered; skipped")),
                Some(r) => match r.tool.gate {
                    Some(gate) if !gate_open(gate) => warnings.push(format!(
                        "tool {name:?} is disabled; set {gate}=true to allow it"
                    )),
                    _ => specs.push(spec(r)),
                },
            }
        }
        (specs, warnings)
    }

    /// Checks the input against the tool's schema, then runs its handler. Its answer (or
    /// error) is cut to [`MAX_RESULT_BYTES`], whatever the tool is: built in, a component's,
    /// or a server's, so no tool can make a run resend or store more.
    pub async fn invoke(
        &self,
        name: &str,
        input: Value,
        ctx: ToolContext,
    ) -> Result<String, String> {
        let registered = self
            .get(name)
            .ok_or_else(|| format!("unknown tool {name:?}"))?;
        if let Some(error) = registered.validator.iter_errors(&input).next() {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" at {path}")
            };
            return Err(format!("invalid arguments for {name}{at}: {error}"));
        }
        let handler = registered
            .tool
            .handler
            .clone()
            .ok_or_else(|| format!("tool {name:?} has no handler"))?;
        handler.call(input, ctx).await.map(cut).map_err(cut)
    }
}

/// What a wildcard entry's tools start with (`mcp__files__` for `mcp__files__*`).
fn wildcard_prefix(name: &str) -> Option<&str> {
    name.strip_suffix('*')
        .filter(|_| name.ends_with(WILDCARD_SUFFIX))
}

fn named_under<'a>(
    tools: &'a BTreeMap<String, Arc<Registered>>,
    prefix: &'a str,
) -> impl Iterator<Item = &'a String> {
    tools
        .range(prefix.to_owned()..)
        .take_while(move |(tool, _)| tool.starts_with(prefix))
        .map(|(tool, _)| tool)
}

/// The most of a tool's answer that goes on: to the model, into the trace, to a component.
pub const MAX_RESULT_BYTES: usize = 64 << 10;

/// `text`, or its first [`MAX_RESULT_BYTES`] with a line saying how much there was.
fn cut(mut text: String) -> String {
    let total = text.len();
    if total <= MAX_RESULT_BYTES {
        return text;
    }
    let mut kept = MAX_RESULT_BYTES;
    while !text.is_char_boundary(kept) {
        kept -= 1;
    }
    text.truncate(kept);
    text.push_str(&format!(
        "\n[cut: the tool answered {total} bytes; these are the first {kept}]"
    ));
    text
}

/// Deserializes schema-checked input into the handler's own type.
pub fn args<T: DeserializeOwned>(input: Value) -> Result<T, String> {
    serde_json::from_value(input).map_err(|e| format!("invalid arguments: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, answer: &'static str) -> Tool {
        Tool::new(
            name,
            "test tool",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            move |_input, _ctx| async move { Ok::<_, String>(answer.to_owned()) },
        )
    }

    fn context() -> ToolContext {
        struct NoAgents;
        impl AgentRunner for NoAgents {
            fn run(
                &self,
                _request: crate::agent::RunRequest,
                _cancel: CancellationToken,
            ) -> BoxFuture<'static, Result<crate::agent::RunReply, crate::agent::RunFailure>>
            {
                unreachable!("these tools run no agents")
            }

            fn provider_name(&self) -> String {
                "none".into()
            }
        }
        ToolContext {
            agents: Arc::new(NoAgents),
            run: None,
            cancel: CancellationToken::new(),
        }
    }

    #[tokio::test]
    async fn a_name_is_taken_once_unless_replaced() {
        let registry = ToolRegistry::new();
        registry.register(tool("lookup", "first"), false).unwrap();
        let duplicate = registry.register(tool("lookup", "second"), false);
        assert!(
            matches!(&duplicate, Err(RegistryError::Duplicate(name)) if name == "lookup"),
            "{duplicate:?}"
        );
        assert_eq!(
            duplicate.unwrap_err().to_string(),
            "a tool named \"lookup\" is already registered (register with replace to swap it)"
        );
        let input = json!({"n": 1});
        assert_eq!(
            registry.invoke("lookup", input.clone(), context()).await,
            Ok("first".to_owned()),
            "a refused registration changes nothing"
        );
        registry.register(tool("lookup", "second"), true).unwrap();
        assert_eq!(
            registry.invoke("lookup", input, context()).await,
            Ok("second".to_owned())
        );
        assert_eq!(registry.list().len(), 1);
    }

    #[tokio::test]
    async fn an_answer_or_error_past_the_bound_is_cut_and_says_so() {
        let registry = ToolRegistry::new();
        let huge = |fail: bool| {
            move |_: Value, _: ToolContext| async move {
                // Multi-byte characters, so the cut must find a boundary.
                let text = "é".repeat(MAX_RESULT_BYTES);
                if fail { Err(text) } else { Ok(text) }
            }
        };
        let schema = json!({"type": "object"});
        registry
            .register(Tool::new("flood", "", schema.clone(), huge(false)), false)
            .unwrap();
        registry
            .register(Tool::new("flood_error", "", schema, huge(true)), false)
            .unwrap();
        let answer = registry
            .invoke("flood", json!({}), context())
            .await
            .unwrap();
        let error = registry
            .invoke("flood_error", json!({}), context())
            .await
            .unwrap_err();
        for text in [answer, error] {
            assert!(text.len() < MAX_RESULT_BYTES + 100, "{}", text.len());
            assert!(
                text.ends_with(&format!(
                    "[cut: the tool answered {} bytes; these are the first {MAX_RESULT_BYTES}]",
                    2 * MAX_RESULT_BYTES
                )),
                "{}",
                &text[text.len() - 100..]
            );
        }
        registry.register(tool("small", "whole"), false).unwrap();
        assert_eq!(
            registry.invoke("small", json!({"n": 1}), context()).await,
            Ok("whole".to_owned())
        );
    }

    #[tokio::test]
    async fn input_is_checked_against_the_schema_first() {
        let registry = ToolRegistry::new();
        registry.register(tool("lookup", "ran"), false).unwrap();
        let error = registry
            .invoke("lookup", json!({"n": "one"}), context())
            .await
            .unwrap_err();
        assert!(
            error.starts_with("invalid arguments for lookup at /n"),
            "{error}"
        );
        let missing = registry.invoke("lookup", json!({}), context()).await;
        assert!(
            missing
                .unwrap_err()
                .contains("\"n\" is a required property")
        );
        let unknown = registry.invoke("nope", json!({}), context()).await;
        assert_eq!(unknown, Err("unknown tool \"nope\"".to_owned()));
    }

    #[test]
    fn bad_names_and_schemas_are_refused() {
        let registry = ToolRegistry::new();
        assert!(matches!(
            registry.register(tool("two words", "x"), false),
            Err(RegistryError::InvalidName(_))
        ));
        let bad_schema = Tool::new(
            "odd",
            "x",
            json!({"type": "no-such-type"}),
            |_input, _ctx| async { Ok::<_, String>(String::new()) },
        );
        assert!(matches!(
            registry.register(bad_schema, false),
            Err(RegistryError::InvalidSchema { .. })
        ));
        assert!(registry.list().is_empty());
    }

    #[test]
    fn gated_tools_are_never_inherited() {
        let registry = ToolRegistry::new();
        registry.register(tool("notes", "x"), false).unwrap();
        let mut shell = tool("shell", "x");
        shell.gate = Some("SHELL_ON");
        registry.register(shell, false).unwrap();
        assert_eq!(registry.gate_of("shell"), Some("SHELL_ON"));
        let names = |specs: Vec<ToolSpec>| specs.into_iter().map(|s| s.name).collect::<Vec<_>>();

        let (unset, _) = registry.allowed(None, |_| true);
        assert_eq!(names(unset), ["notes"]);
        let listed = ["shell".to_owned(), "gone".to_owned()];
        let (closed, warnings) = registry.allowed(Some(&listed), |_| false);
        assert!(closed.is_empty());
        assert_eq!(
            warnings,
            [
                "tool \"shell\" is disabled; set SHELL_ON=true to allow it",
                "tool \"gone\" is not registered; skipped"
            ]
        );
        let (open, _) = registry.allowed(Some(&listed), |gate| gate == "SHELL_ON");
        assert_eq!(names(open), ["shell"]);
    }

    #[test]
    fn named_only_tools_go_to_those_who_name_them_or_their_wildcard() {
        let registry = ToolRegistry::new();
        registry.register(tool("notes", "x"), false).unwrap();
        for name in ["mcp__files__read", "mcp__files__write", "mcp__other__read"] {
            registry
                .register(tool(name, "x").named_only(), false)
                .unwrap();
        }
        let names = |specs: Vec<ToolSpec>| specs.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(names(registry.allowed(None, |_| true).0), ["notes"]);
        let listed = [
            "mcp__files__*".to_owned(),
            "mcp__files__read".to_owned(),
            "mcp__none__*".to_owned(),
        ];
        let (specs, warnings) = registry.allowed(Some(&listed), |_| true);
        assert_eq!(names(specs), ["mcp__files__read", "mcp__files__write"]);
        assert_eq!(warnings, ["no registered tool matches \"mcp__none__*\""]);
        assert_eq!(
            registry.expand("mcp__files__*"),
            Some(vec!["mcp__files__read".into(), "mcp__files__write".into()])
        );
        assert_eq!(registry.expand("mcp__files__read"), None);

        assert!(!registry.knows("mcp__later__tool"));
        registry.add_source("mcp__later__", "the MCP server \"later\"");
        assert!(registry.knows("mcp__later__tool") && registry.knows("mcp__later__*"));
        assert!(!registry.knows("later__*"));
        assert_eq!(
            registry.source_of("mcp__later__*").as_deref(),
            Some("the MCP server \"later\"")
        );
    }
}
