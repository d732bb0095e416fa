//! Sessions of people signed in: a random cookie whose SHA-256 the database keeps, with an
//! idle and an absolute expiry. In the database, so every replica knows a session and
//! sign-out ends it everywhere.

use chrono::{DateTime, Duration, SecondsFormat, Utc};

use super::credential;
use super::users::{self, User};
use crate::db::{self, Conn};
use crate::error::Result;
use crate::params;

/// The cookie's name.
pub const COOKIE: &str = "service_session";

/// How long a session lasts unused, and at most.
#[derive(Debug, Clone, Copy)]
pub struct Lives {
    pub idle: Duration,
    pub absolute: Duration,
}

/// A session found by its cookie.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: User,
    pub seen_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at).ok().map(|at| at.to_utc())
}

/// Starts a session for `user`; returns the cookie's value, which nothing stores.
pub fn start(conn: &Conn, user: &str, lives: Lives) -> Result<String> {
    let secret = credential::random_text();
    let now = Utc::now();
    conn.execute(
        "INSERT INTO sessions (hash, user_name, created_at, seen_at, expires_at) \
         VALUES (?1, ?2, ?3, ?3, ?4)",
        params![
            credential::digest(&secret),
            user,
            stamp(now),
            stamp(now + lives.absolute)
        ],
    )?;
    users::signed_in(conn, user)?;
    Ok(secret)
}

/// The live session whose cookie is `secret`; an expired one is deleted.
pub fn find(conn: &Conn, secret: &str, lives: Lives) -> Result<Option<Session>> {
    let hash = credential::digest(secret);
    let found = conn.query_opt(
        &format!(
            "SELECT sessions.seen_at, sessions.expires_at, {} FROM sessions \
             JOIN users ON users.name = sessions.user_name WHERE sessions.hash = ?1",
            users::COLUMNS
        ),
        params![hash],
        |row| {
            let seen_at: String = row.get(0)?;
            let expires_at: String = row.get(1)?;
            Ok((seen_at, expires_at, users::from_row_at(row, 2)?))
        },
    )?;
    let Some((seen_at, expires_at, user)) = found else {
        return Ok(None);
    };
    let now = Utc::now();
    let (Some(seen_at), Some(expires_at)) = (parse(&seen_at), parse(&expires_at)) else {
        return Ok(None);
    };
    if expires_at <= now || seen_at + lives.idle <= now {
        conn.execute("DELETE FROM sessions WHERE hash = ?1", params![hash])?;
        return Ok(None);
    }
    Ok(Some(Session {
        user,
        seen_at,
        expires_at,
    }))
}

/// The session's anti-forgery token: derived from the cookie, which a page of another site
/// cannot read, so a write that carries it was made by a page of this one.
pub fn csrf_token(secret: &str) -> String {
    credential::digest(&format!("anti-forgery:{secret}"))[..32].to_owned()
}

/// Records a use of the session (what its idle expiry counts from).
pub fn touch(conn: &Conn, secret: &str) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET seen_at = ?2 WHERE hash = ?1",
        params![credential::digest(secret), db::now()],
    )?;
    Ok(())
}

/// Ends the session whose cookie is `secret` (sign-out).
pub fn end(conn: &Conn, secret: &str) -> Result<()> {
    conn.execute(
        "DELETE FROM sessions WHERE hash = ?1",
        params![credential::digest(secret)],
    )?;
    Ok(())
}

/// Ends every session of `user`; returns how many.
pub fn end_all(conn: &Conn, user: &str) -> Result<u64> {
    conn.execute("DELETE FROM sessions WHERE user_name = ?1", params![user])
}

/// Deletes sessions past their absolute expiry (idle ones go when next presented, or here
/// once their absolute expiry passes).
pub fn trim(conn: &Conn) -> Result<u64> {
    conn.execute(
        "DELETE FROM sessions WHERE expires_at <= ?1",
        params![db::now()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::db::testing::{Backends, each_conn};

    const LIVES: Lives = Lives {
        idle: Duration::hours(1),
        absolute: Duration::days(1),
    };

    #[test]
    fn a_session_lives_until_ended_idle_or_old() {
        each_conn(Backends::Both, |conn| {
            users::add(conn, "ada", Role::Member, "owner").unwrap();
            let cookie = start(conn, "ada", LIVES).unwrap();
            let found = find(conn, &cookie, LIVES).unwrap().unwrap();
            assert_eq!(found.user.name, "ada");
            assert!(found.user.last_sign_in_at.is_some());
            assert!(find(conn, "forged", LIVES).unwrap().is_none());
            // Idle for longer than allowed.
            let idle = Lives {
                idle: Duration::zero(),
                ..LIVES
            };
            assert!(find(conn, &cookie, idle).unwrap().is_none());
            assert!(find(conn, &cookie, LIVES).unwrap().is_none(), "deleted");

            let cookie = start(conn, "ada", LIVES).unwrap();
            touch(conn, &cookie).unwrap();
            end(conn, &cookie).unwrap();
            assert!(find(conn, &cookie, LIVES).unwrap().is_none());

            let old = Lives {
                absolute: Duration::zero(),
                ..LIVES
            };
            let cookie = start(conn, "ada", old).unwrap();
            assert_eq!(trim(conn).unwrap(), 1);
            assert!(find(conn, &cookie, LIVES).unwrap().is_none());
            start(conn, "ada", LIVES).unwrap();
            assert_eq!(end_all(conn, "ada").unwrap(), 1);
        });
    }
}
