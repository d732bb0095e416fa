//! One-time links: the one that creates the first admin of a server nobody can sign in to,
//! and the one a new local user (or one whose password is reset) sets a password with.
//! Usable once: taking a link deletes it.

use chrono::{Duration, SecondsFormat, Utc};

use super::credential;
use super::roles::Role;
use super::users::{self, Source, User};
use crate::db::Conn;
use crate::error::{Error, Result};
use crate::params;

/// How long a first-admin link lasts.
pub(crate) const FIRST_ADMIN_LIFE: Duration = Duration::minutes(15);
/// How long a link to set a password lasts.
pub(crate) const PASSWORD_LIFE: Duration = Duration::days(7);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    FirstAdmin,
    /// Sets the password of the named local user.
    Password(String),
}

/// Stores a new link; returns its secret (the part of the URL after `#link=`).
pub fn create(conn: &Conn, link: &Link) -> Result<String> {
    let secret = credential::random_text();
    let (purpose, user, life) = match link {
        Link::FirstAdmin => ("first_admin", None, FIRST_ADMIN_LIFE),
        Link::Password(user) => ("password", Some(user.as_str()), PASSWORD_LIFE),
    };
    let expires_at = (Utc::now() + life).to_rfc3339_opts(SecondsFormat::Millis, true);
    conn.execute(
        "INSERT INTO sign_in_links (hash, purpose, user_name, expires_at) VALUES (?1, ?2, ?3, ?4)",
        params![credential::digest(&secret), purpose, user, expires_at],
    )?;
    Ok(secret)
}

/// Adds a local user and the link they set their password with.
pub fn invite(conn: &mut Conn, name: &str, role: Role, created_by: &str) -> Result<(User, String)> {
    conn.transaction(|conn| {
        let user = users::add(conn, name, role, created_by)?;
        let secret = create(conn, &Link::Password(user.name.clone()))?;
        Ok((user, secret))
    })
}

/// A new link for a local user to set a new password with.
pub fn reset(conn: &Conn, name: &str) -> Result<String> {
    if users::get(conn, name)?.source != Source::Local {
        return Err(Error::conflict(format!(
            "{name:?} signs in through single sign-on and has no password here"
        )));
    }
    create(conn, &Link::Password(name.to_owned()))
}

/// Takes the link whose secret is `secret`: `None` when it is unknown, used or expired.
/// Call it inside the transaction that does what the link allows, so a failure keeps it.
pub fn take(conn: &Conn, secret: &str) -> Result<Option<Link>> {
    let taken = conn.query_opt(
        "DELETE FROM sign_in_links WHERE hash = ?1 RETURNING purpose, user_name, expires_at",
        params![credential::digest(secret)],
        |row| {
            let purpose: String = row.get(0)?;
            let user: Option<String> = row.get(1)?;
            let expires_at: String = row.get(2)?;
            Ok((purpose, user, expires_at))
        },
    )?;
    let now = crate::db::now();
    Ok(taken.and_then(|(purpose, user, expires_at)| {
        // Stored in the fixed-width format, so text order is time order.
        if expires_at <= now {
            return None;
        }
        match (purpose.as_str(), user) {
            ("first_admin", _) => Some(Link::FirstAdmin),
            (_, Some(user)) => Some(Link::Password(user)),
            _ => None,
        }
    }))
}

/// Deletes the links past their expiry.
pub fn trim(conn: &Conn) -> Result<u64> {
    conn.execute(
        "DELETE FROM sign_in_links WHERE expires_at <= ?1",
        params![crate::db::now()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn a_link_is_taken_once() {
        each_conn(Backends::Both, |conn| {
            let first = create(conn, &Link::FirstAdmin).unwrap();
            assert_eq!(take(conn, &first).unwrap(), Some(Link::FirstAdmin));
            assert_eq!(take(conn, &first).unwrap(), None, "used");
            let (_, set) = invite(conn, "ada", Role::Member, "owner").unwrap();
            assert!(reset(conn, "nobody").is_err());
            assert_eq!(take(conn, "forged").unwrap(), None);
            conn.execute(
                "UPDATE sign_in_links SET expires_at = '2000-01-01T00:00:00.000Z'",
                params![],
            )
            .unwrap();
            assert_eq!(take(conn, &set).unwrap(), None, "expired");
            create(conn, &Link::FirstAdmin).unwrap();
            conn.execute(
                "UPDATE sign_in_links SET expires_at = '2000-01-01T00:00:00.000Z'",
                params![],
            )
            .unwrap();
            assert_eq!(trim(conn).unwrap(), 1);
        });
    }
}
