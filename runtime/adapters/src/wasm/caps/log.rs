//! `log`: guest log lines in the server's log, tagged with the adapter's name. Always
//! available, and bounded: a line is cut at [`MAX_LINE_CHARS`], control characters are escaped
//! (a newline cannot forge a line), and each adapter has a rate; what it drops is counted on
//! its registry entry (`log_lines_dropped`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::json;
use service_contract::registry::clip;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::rate::PerMinute;
use super::super::state::HostState;
use super::{Capability, link_versions};

/// The longest line kept.
pub(crate) const MAX_LINE_CHARS: usize = 2_000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub log_lines_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            log_lines_per_minute: 600,
        }
    }
}

pub struct State {
    rate: PerMinute,
    dropped: AtomicU64,
}

pub struct Log;

impl Capability for Log {
    const INTERFACE: &'static str = "log";
    const KEYS: &'static [&'static str] = &[];
    const LIMIT_KEYS: &'static [LimitKey] = &[LimitKey {
        name: "log_lines_per_minute",
        max: 60_000,
    }];
    type Grant = Grant;
    type Granted = Limits;
    type State = State;

    fn grant(
        _: &Request,
        grant: &Grant,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Limits, String> {
        Ok(grant.limits)
    }

    fn granted_anything(_: &Limits) -> bool {
        true
    }

    fn summary(_: &Limits) -> Vec<String> {
        Vec::new()
    }

    fn state(limits: &Limits) -> anyhow::Result<State> {
        Ok(State {
            rate: PerMinute::new(limits.log_lines_per_minute),
            dropped: AtomicU64::new(0),
        })
    }

    fn suggest(_: &Request) -> Vec<String> {
        Vec::new()
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, log)
    }
}

/// One line: control characters escaped, cut to [`MAX_LINE_CHARS`] (looking no further into
/// a long message than the line needs).
fn one_line(message: &str) -> String {
    let escaped: String = message
        .chars()
        .take(MAX_LINE_CHARS + 1)
        .flat_map(|c| match c {
            c if c.is_control() => c.escape_default().collect::<Vec<_>>(),
            c => vec![c],
        })
        .collect();
    clip(&escaped, MAX_LINE_CHARS).into_owned()
}

impl latest::service::adapter::log::Host for HostState {
    async fn log(
        &mut self,
        level: latest::service::adapter::log::Level,
        message: String,
    ) -> wasmtime::Result<()> {
        use latest::service::adapter::log::Level;
        self.heavy(message.len()).await;
        let args = self.args(|| json!({"level": level, "message": message}));
        if let Some(()) = self.replayed("log.log", &args)? {
            return Ok(());
        }
        self.taped("log.log", args, &());
        let caller = &self.caller;
        let state = &caller.states.log;
        if !state.rate.take() {
            let dropped = state.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            caller.services.registry.set_metadata(
                &caller.adapter,
                "log_lines_dropped",
                &dropped.to_string(),
            );
            return Ok(());
        }
        let (adapter, line) = (caller.adapter.as_str(), one_line(&message));
        match level {
            Level::Debug => tracing::debug!(adapter, "{line}"),
            Level::Info => tracing::info!(adapter, "{line}"),
            Level::Warn => tracing::warn!(adapter, "{line}"),
            Level::Error => tracing::error!(adapter, "{line}"),
        }
        Ok(())
    }
}

impl v0_1::service::adapter::log::Host for HostState {
    async fn log(
        &mut self,
        level: v0_1::service::adapter::log::Level,
        message: String,
    ) -> wasmtime::Result<()> {
        use latest::service::adapter::log::Level;
        use v0_1::service::adapter::log::Level as Old;
        let level = match level {
            Old::Debug => Level::Debug,
            Old::Info => Level::Info,
            Old::Warn => Level::Warn,
            Old::Error => Level::Error,
        };
        latest::service::adapter::log::Host::log(self, level, message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cannot_forge_another_or_grow_without_bound() {
        assert_eq!(
            one_line("ok\n2026-11-23 INFO forged"),
            "ok\\n2026-11-23 INFO forged"
        );
        assert_eq!(one_line("tab\there\u{1b}[31m"), "tab\\there\\u{1b}[31m");
        assert_eq!(
            one_line(&"x".repeat(10 * MAX_LINE_CHARS)).chars().count(),
            MAX_LINE_CHARS + 1
        );
    }
}
