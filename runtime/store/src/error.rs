//! The one error type of the service's domain layer. The HTTP layer maps each kind to a
//! status code; the CLI prints the message.

use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input is wrong (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// One named input field is wrong (HTTP 400); forms show the message beside the field.
    #[error("{message}")]
    InvalidField {
        field: &'static str,
        message: String,
    },
    /// The addressed thing does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The caller may not act on this one thing (HTTP 403): another person's conversation.
    #[error("{0}")]
    Forbidden(String),
    /// The request conflicts with existing state (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The database cannot be reached now; the same request may work later (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: a bug or an I/O failure (HTTP 500, details only in the log).
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Error {
    /// A database that went away stays a 503 after passing through code that speaks `anyhow`
    /// (an agent run's, say): the same request may work later.
    fn from(e: anyhow::Error) -> Self {
        match e.downcast_ref::<Error>() {
            Some(Self::Unavailable(message)) => Self::Unavailable(message.clone()),
            _ => Self::Internal(e),
        }
    }
}

impl Error {
    pub fn invalid(message: impl fmt::Display) -> Self {
        Self::Invalid(message.to_string())
    }

    pub fn field(field: &'static str, message: impl fmt::Display) -> Self {
        Self::InvalidField {
            field,
            message: message.to_string(),
        }
    }

    pub fn not_found(message: impl fmt::Display) -> Self {
        Self::NotFound(message.to_string())
    }

    pub fn conflict(message: impl fmt::Display) -> Self {
        Self::Conflict(message.to_string())
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Self::Internal(e.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_that_went_away_stays_unavailable_through_anyhow() {
        let lost = Error::Unavailable("the database is unreachable: connection closed".into());
        let through = anyhow::Error::from(lost).context("reading the agent");
        assert!(matches!(Error::from(through), Error::Unavailable(m) if m.ends_with("closed")));
        let other = Error::from(anyhow::anyhow!("a bug"));
        assert!(matches!(other, Error::Internal(_)));
    }
}
