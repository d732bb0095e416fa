//! What went wrong talking to the mail servers, as the registry entry shows it
//! (`<kind>: <message>`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Config,
    /// The server refused the login. Retrying would only risk locking the account.
    Auth,
    /// Unreachable, timed out or dropped: worth another try later.
    Connection,
    Tls,
    /// The IMAP server refused a command or answered something unexpected.
    Imap,
    /// The SMTP server refused a reply.
    Smtp,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Config => "ConfigError",
            Self::Auth => "AuthError",
            Self::Connection => "ConnectionError",
            Self::Tls => "TlsError",
            Self::Imap => "ImapError",
            Self::Smtp => "SmtpError",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Polling stops: only a change of settings (and a restart) can fix this.
    pub fn is_final(&self) -> bool {
        matches!(self.kind, Kind::Auth | Kind::Config)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

/// An error with its causes: "tls error" alone does not say what failed. Causes that repeat
/// what is already said are left out.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = inner.source();
    }
    text
}
