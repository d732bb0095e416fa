//! API tokens: a name, a role and a secret shown once. The database keeps the secret's
//! SHA-256 only (a token is 32 random bytes: a slow hash would add nothing but time).

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;

use super::credential;
use super::roles::Role;
use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;

/// What every token starts with, so a leaked one is recognisable (secret scanners, logs).
pub const PREFIX: &str = "srt_";

/// The longest life a token may be given.
pub(crate) const MAX_DAYS: i64 = 3650;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Token {
    pub name: String,
    pub role: Role,
    /// The secret's first characters, to tell tokens apart; never enough to use one.
    pub hint: String,
    pub created_at: String,
    pub created_by: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
}

impl Token {
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at
            .as_deref()
            .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
            .is_some_and(|at| at <= now)
    }
}

/// A token to create, checked.
pub struct NewToken {
    pub name: String,
    pub role: Role,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_by: String,
}

impl NewToken {
    /// `expires` is a life such as `30d` or `12h` (at most [`MAX_DAYS`] days).
    pub fn new(name: &str, role: Role, expires: Option<&str>, created_by: &str) -> Result<Self> {
        check_name(name)?;
        let expires_at = expires.map(life).transpose()?.map(|life| Utc::now() + life);
        Ok(Self {
            name: name.to_owned(),
            role,
            expires_at,
            created_by: created_by.to_owned(),
        })
    }
}

pub fn check_name(name: &str) -> Result<()> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
        return Err(Error::InvalidField {
            field: "name",
            message: format!("name must be 1 to 64 letters, digits, '-', '_' or '.', got {name:?}"),
        });
    }
    Ok(())
}

/// `30d`, `12h` or `45m`.
fn life(text: &str) -> Result<Duration> {
    let invalid = || Error::InvalidField {
        field: "expires",
        message: format!(
            "expires must be a number of days, hours or minutes such as 30d, 12h or 45m \
             (at most {MAX_DAYS}d), got {text:?}"
        ),
    };
    let text = text.trim();
    // The unit is the last character, whatever its width; a number too large for a
    // duration is refused like any other past the limit.
    let unit = text.chars().next_back().ok_or_else(invalid)?;
    let number: i64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| invalid())?;
    let life = match unit {
        'd' => Duration::try_days(number),
        'h' => Duration::try_hours(number),
        'm' => Duration::try_minutes(number),
        _ => None,
    };
    match life {
        Some(life) if number >= 1 && life <= Duration::days(MAX_DAYS) => Ok(life),
        _ => Err(invalid()),
    }
}

const COLUMNS: &str = "name, role, hint, created_at, created_by, expires_at, last_used_at";

fn from_row(row: &Row) -> Result<Token> {
    let role: String = row.get(1)?;
    Ok(Token {
        name: row.get(0)?,
        role: Role::parse(&role, "role")?,
        hint: row.get(2)?,
        created_at: row.get(3)?,
        created_by: row.get(4)?,
        expires_at: row.get(5)?,
        last_used_at: row.get(6)?,
    })
}

/// Stores a new token; returns it with its secret, which nothing can show again.
pub fn create(conn: &Conn, new: &NewToken) -> Result<(Token, String)> {
    let secret = format!("{PREFIX}{}", credential::random_text());
    let expires_at = new
        .expires_at
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true));
    let token = conn
        .query_opt(
            &format!(
                "INSERT INTO access_tokens (name, role, hint, created_at, created_by, \
                 expires_at, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
            ),
            params![
                new.name,
                new.role.as_str(),
                secret[..PREFIX.len() + 4].to_owned(),
                db::now(),
                new.created_by,
                expires_at,
                credential::digest(&secret)
            ],
            from_row,
        )?
        .ok_or_else(|| Error::conflict(format!("a token named {:?} already exists", new.name)))?;
    Ok((token, secret))
}

pub fn list(conn: &Conn) -> Result<Vec<Token>> {
    conn.query(
        &format!("SELECT {COLUMNS} FROM access_tokens ORDER BY name"),
        params![],
        from_row,
    )
}

/// The token whose secret is `secret`, expired or not.
pub fn find(conn: &Conn, secret: &str) -> Result<Option<Token>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM access_tokens WHERE hash = ?1"),
        params![credential::digest(secret)],
        from_row,
    )
}

/// Deletes the token named `name`: it is refused from then on.
pub fn revoke(conn: &Conn, name: &str) -> Result<()> {
    let deleted = conn.execute("DELETE FROM access_tokens WHERE name = ?1", params![name])?;
    if deleted == 0 {
        return Err(Error::NotFound(format!("no token named {name:?}")));
    }
    Ok(())
}

/// Records a use of the token named `name`.
pub fn touch(conn: &Conn, name: &str) -> Result<()> {
    conn.execute(
        "UPDATE access_tokens SET last_used_at = ?2 WHERE name = ?1",
        params![name, db::now()],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn a_token_is_found_by_its_secret_only_until_revoked() {
        each_conn(Backends::Both, |conn| {
            let new = NewToken::new("ci", Role::Viewer, Some("30d"), "owner").unwrap();
            let (token, secret) = create(conn, &new).unwrap();
            assert!(secret.starts_with(PREFIX) && secret.len() > 40, "{secret}");
            assert!(secret.starts_with(&token.hint));
            assert!(!token.expired(Utc::now()));
            assert!(token.expired(Utc::now() + Duration::days(31)));
            assert_eq!(find(conn, &secret).unwrap().unwrap().name, "ci");
            assert!(find(conn, &format!("{secret}x")).unwrap().is_none());
            assert!(matches!(create(conn, &new), Err(Error::Conflict(_))));
            touch(conn, "ci").unwrap();
            assert!(list(conn).unwrap()[0].last_used_at.is_some());
            revoke(conn, "ci").unwrap();
            assert!(find(conn, &secret).unwrap().is_none());
            assert!(matches!(revoke(conn, "ci"), Err(Error::NotFound(_))));
        });
    }

    #[test]
    fn names_and_lives_are_checked() {
        for bad in ["", "has space", &"x".repeat(65)] {
            assert!(
                NewToken::new(bad, Role::Admin, None, "o").is_err(),
                "{bad:?}"
            );
        }
        // Found by Schemathesis: a multi-byte unit and a number past chrono's range panicked.
        for bad in [
            "0d",
            "30",
            "30s",
            "3651d",
            "-1d",
            "d",
            "",
            "1é",
            "9223372036854775807d",
        ] {
            let err = NewToken::new("t", Role::Admin, Some(bad), "o")
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("30d, 12h or 45m"), "{bad}: {err}");
        }
        assert!(NewToken::new("t.1-a_b", Role::Admin, Some("12h"), "o").is_ok());
    }
}
