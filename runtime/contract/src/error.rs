//! How failures of adapters are named on their registry entries (`<Kind>: <message>`).

use std::fmt;

/// The kinds of failure the host records itself. Native adapters may also report kinds of
/// their own through [`AdapterError`] (a scheduler's `TickError`, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A setting is missing or wrong.
    ConfigError,
    /// A component could not be loaded: invalid, refused or unsupported.
    LoadError,
    /// `start` or `stop` reported an error.
    HookError,
    /// No answer within the deadline.
    Timeout,
    Panic,
    /// A WebAssembly trap other than the ones above.
    Trap,
    /// The memory limit was reached.
    MemoryLimit,
    /// Something used without a grant.
    CapabilityDenied,
    /// Past a quota (stored bytes, pending jobs, log lines, agent runs...).
    QuotaExceeded,
    /// A tool the adapter offers is invalid.
    ToolError,
    /// Reported by the adapter itself.
    AdapterError,
    /// An answer the host cannot pass on (an impossible status, too many headers).
    BadResponse,
    /// The host failed around the call.
    HostError,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigError => "ConfigError",
            Self::LoadError => "LoadError",
            Self::HookError => "HookError",
            Self::Timeout => "Timeout",
            Self::Panic => "Panic",
            Self::Trap => "Trap",
            Self::MemoryLimit => "MemoryLimit",
            Self::CapabilityDenied => "CapabilityDenied",
            Self::QuotaExceeded => "QuotaExceeded",
            Self::ToolError => "ToolError",
            Self::AdapterError => "AdapterError",
            Self::BadResponse => "BadResponse",
            Self::HostError => "HostError",
        }
    }
}

impl AsRef<str> for FailureKind {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error an adapter reports; shown on its registry entry as `<kind>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterError {
    /// A short type name such as `ConfigError`.
    pub kind: String,
    pub message: String,
}

impl AdapterError {
    pub fn new(kind: impl AsRef<str>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.as_ref().to_owned(),
            message: message.into(),
        }
    }

    /// A missing or invalid setting.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(FailureKind::ConfigError, message)
    }

    /// Whether it is a failure of this host-named kind.
    pub fn is(&self, kind: FailureKind) -> bool {
        self.kind == kind.as_str()
    }
}

impl fmt::Display for AdapterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for AdapterError {}

/// What keeps an adapter from working with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigProblem {
    /// Settings it cannot work without are not set, and nothing else is wrong: it waits for
    /// them (its entry lists them, and the dashboard offers to set them).
    Missing(Missing),
    /// A setting has a value it cannot use (every problem, one line).
    Invalid(String),
}

/// Settings that are not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// Each of these is needed.
    All(Vec<String>),
    /// Any one of these ways, each the variables of it that are not set, would do (a calendar
    /// over CalDAV or over Google, say).
    AnyOf(Vec<Vec<String>>),
}

impl Missing {
    /// Every variable named, each once, in the order given.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let all = match self {
            Self::All(names) => std::slice::from_ref(names),
            Self::AnyOf(ways) => ways.as_slice(),
        };
        for name in all.iter().flatten() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }
}

/// `A`, `A and B`, `A, B and C`.
fn and_list(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unset = |names: &[String]| {
            let verb = if names.len() == 1 { "is" } else { "are" };
            format!("{} {verb} not set", and_list(names))
        };
        match self {
            Self::All(names) => f.write_str(&unset(names)),
            Self::AnyOf(ways) => {
                let ways: Vec<String> = ways.iter().map(|way| unset(way)).collect();
                write!(f, "{} (any one of these ways will do)", ways.join("; or "))
            }
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(missing) => missing.fmt(f),
            Self::Invalid(message) => f.write_str(message),
        }
    }
}
