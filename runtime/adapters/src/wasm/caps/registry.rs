//! `registry`: the adapter's own registry entry. Always available.

use serde_json::{Value, json};
use service_contract::{FailureKind, Missing};
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::{Capability, Nothing, link_versions};

pub struct Registry;

impl Capability for Registry {
    const INTERFACE: &'static str = "registry";
    const KEYS: &'static [&'static str] = &[];
    const LIMIT_KEYS: &'static [LimitKey] = &[];
    type Grant = Nothing;
    type Granted = ();
    type State = ();

    fn grant(_: &Request, _: &Nothing, _: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        Ok(())
    }

    fn granted_anything(_: &()) -> bool {
        true
    }

    fn summary(_: &()) -> Vec<String> {
        Vec::new()
    }

    fn state(_: &()) -> anyhow::Result<()> {
        Ok(())
    }

    fn suggest(_: &Request) -> Vec<String> {
        Vec::new()
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, registry)
    }
}

impl latest::service::adapter::registry::Host for HostState {
    async fn touch(&mut self) -> wasmtime::Result<()> {
        let args = self.args(|| Value::Null);
        if let Some(()) = self.replayed("registry.touch", &args)? {
            return Ok(());
        }
        self.caller.services.registry.touch(&self.caller.adapter);
        self.taped("registry.touch", args, &());
        Ok(())
    }

    async fn mark_running(&mut self) -> wasmtime::Result<()> {
        let args = self.args(|| Value::Null);
        if let Some(()) = self.replayed("registry.mark-running", &args)? {
            return Ok(());
        }
        self.caller
            .services
            .registry
            .mark_running(&self.caller.adapter);
        self.taped("registry.mark-running", args, &());
        Ok(())
    }

    async fn mark_error(&mut self, message: String) -> wasmtime::Result<()> {
        self.heavy(message.len()).await;
        let args = self.args(|| json!({"message": message}));
        if let Some(()) = self.replayed("registry.mark-error", &args)? {
            return Ok(());
        }
        self.caller.record(FailureKind::AdapterError, &message);
        self.taped("registry.mark-error", args, &());
        Ok(())
    }

    async fn status(&mut self) -> wasmtime::Result<String> {
        let args = self.args(|| Value::Null);
        if let Some(answer) = self.replayed("registry.status", &args)? {
            return Ok(answer);
        }
        let entry = self.caller.services.registry.get(&self.caller.adapter);
        let status = entry.map_or("stopped", |e| e.status.as_str()).to_owned();
        self.taped("registry.status", args, &status);
        Ok(status)
    }

    async fn needs_settings(&mut self, ways: Vec<Vec<String>>) -> wasmtime::Result<()> {
        let args = self.args(|| json!({"ways": ways}));
        if let Some(()) = self.replayed("registry.needs-settings", &args)? {
            return Ok(());
        }
        self.taped("registry.needs-settings", args, &());
        match missing(ways) {
            Ok(missing) => self
                .caller
                .services
                .registry
                .mark_needs_settings(&self.caller.adapter, &missing),
            Err(why) => self
                .caller
                .record(FailureKind::AdapterError, &format!("needs-settings: {why}")),
        }
        Ok(())
    }
}

/// Ways to configure an adapter, per the contract's bounds: at most this many ways...
const MAX_WAYS: usize = 8;
/// ... of at most this many names...
const MAX_NAMES: usize = 16;
/// ... of at most this many characters.
const MAX_NAME_CHARS: usize = 128;

/// What a component says it waits for, checked: an entry stays small and names only variables.
fn missing(mut ways: Vec<Vec<String>>) -> Result<Missing, String> {
    ways.retain(|way| !way.is_empty());
    if ways.is_empty() {
        return Err("no setting named".into());
    }
    if ways.len() > MAX_WAYS || ways.iter().any(|way| way.len() > MAX_NAMES) {
        return Err(format!(
            "at most {MAX_WAYS} ways of at most {MAX_NAMES} names each"
        ));
    }
    let is_variable = |name: &String| {
        !name.is_empty()
            && name.len() <= MAX_NAME_CHARS
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    if let Some(bad) = ways.iter().flatten().find(|name| !is_variable(name)) {
        let shown: String = bad.chars().take(MAX_NAME_CHARS).collect();
        return Err(format!(
            "{shown:?} is not a variable name (A-Z, 0-9 and _, at most {MAX_NAME_CHARS} characters)"
        ));
    }
    Ok(match ways.len() {
        1 => Missing::All(ways.remove(0)),
        _ => Missing::AnyOf(ways),
    })
}

impl v0_1::service::adapter::registry::Host for HostState {
    async fn touch(&mut self) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::touch(self).await
    }

    async fn mark_running(&mut self) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::mark_running(self).await
    }

    async fn mark_error(&mut self, message: String) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::mark_error(self, message).await
    }

    async fn status(&mut self) -> wasmtime::Result<String> {
        latest::service::adapter::registry::Host::status(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("VAR_{i}")).collect()
    }

    #[test]
    fn what_a_component_says_it_waits_for_is_bounded() {
        assert_eq!(
            missing(vec![names(2)]),
            Ok(Missing::All(names(2))),
            "one way"
        );
        assert!(matches!(
            missing(vec![names(1), names(1)]),
            Ok(Missing::AnyOf(_))
        ));
        assert!(missing(vec![]).is_err());
        assert!(missing(vec![vec![]; 3]).is_err());
        assert!(missing(vec![names(1); MAX_WAYS + 1]).is_err());
        assert!(missing(vec![names(MAX_NAMES + 1)]).is_err());
        assert!(missing(vec![vec!["lower".into()]]).is_err());
        let long = "A".repeat(MAX_NAME_CHARS + 1);
        let refused = missing(vec![vec![long]]).unwrap_err();
        assert!(refused.len() < 300, "the name is cut: {refused}");
    }
}
