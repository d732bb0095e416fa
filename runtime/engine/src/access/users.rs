//! People: local accounts (a password set through a one-time link) and those single sign-on
//! created. A user's name is how records name them (`user:<name>`).

use serde::Serialize;

use super::roles::Role;
use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Local,
    Oidc,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Local => "local",
            Source::Oidc => "oidc",
        }
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct User {
    pub name: String,
    pub role: Role,
    pub source: Source,
    /// The identity provider's groups at the last sign-in.
    pub groups: Vec<String>,
    /// Whether a password is set (never the hash).
    pub has_password: bool,
    pub created_at: String,
    pub created_by: String,
    pub last_sign_in_at: Option<String>,
}

/// 1 to 64 letters, digits, `-`, `_`, `.` or `@` (an e-mail address is a fine name).
pub fn check_name(name: &str) -> Result<()> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@');
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
        return Err(Error::field(
            "name",
            format!("name must be 1 to 64 letters, digits, '-', '_', '.' or '@', got {name:?}"),
        ));
    }
    Ok(())
}

pub(super) const COLUMNS: &str = "users.name, users.role, users.source, users.groups, \
    users.password_hash IS NOT NULL, users.created_at, users.created_by, users.last_sign_in_at";

/// Reads [`COLUMNS`] from `row`, starting at column `at`.
pub(super) fn from_row_at(row: &Row, at: usize) -> Result<User> {
    let role: String = row.get(at + 1)?;
    let source: String = row.get(at + 2)?;
    let groups: String = row.get(at + 3)?;
    Ok(User {
        name: row.get(at)?,
        role: Role::parse(&role, "role")?,
        source: if source == "oidc" {
            Source::Oidc
        } else {
            Source::Local
        },
        groups: serde_json::from_str(&groups).unwrap_or_default(),
        has_password: row.get(at + 4)?,
        created_at: row.get(at + 5)?,
        created_by: row.get(at + 6)?,
        last_sign_in_at: row.get(at + 7)?,
    })
}

fn from_row(row: &Row) -> Result<User> {
    from_row_at(row, 0)
}

/// Adds a local user without a password (a one-time link sets it).
pub fn add(conn: &Conn, name: &str, role: Role, created_by: &str) -> Result<User> {
    check_name(name)?;
    conn.query_opt(
        &format!(
            "INSERT INTO users (name, role, source, created_at, created_by) \
             VALUES (?1, ?2, 'local', ?3, ?4) ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
        ),
        params![name, role.as_str(), db::now(), created_by],
        from_row,
    )?
    .ok_or_else(|| Error::conflict(format!("a user named {name:?} already exists")))
}

pub fn list(conn: &Conn) -> Result<Vec<User>> {
    conn.query(
        &format!("SELECT {COLUMNS} FROM users ORDER BY name"),
        params![],
        from_row,
    )
}

pub fn get(conn: &Conn, name: &str) -> Result<User> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM users WHERE name = ?1"),
        params![name],
        from_row,
    )?
    .ok_or_else(|| Error::not_found(format!("no user named {name:?}")))
}

/// A local user's stored password hash, if the user exists and has one.
pub fn password_hash(conn: &Conn, name: &str) -> Result<Option<String>> {
    Ok(conn
        .query_opt(
            "SELECT password_hash FROM users WHERE name = ?1 AND source = 'local'",
            params![name],
            |row| row.get::<Option<String>>(0),
        )?
        .flatten())
}

pub fn set_password(conn: &Conn, name: &str, hash: &str) -> Result<()> {
    let changed = conn.execute(
        "UPDATE users SET password_hash = ?2 WHERE name = ?1 AND source = 'local'",
        params![name, hash],
    )?;
    if changed == 0 {
        return Err(Error::not_found(format!("no local user named {name:?}")));
    }
    Ok(())
}

pub fn set_role(conn: &Conn, name: &str, role: Role) -> Result<User> {
    conn.query_opt(
        &format!("UPDATE users SET role = ?2 WHERE name = ?1 RETURNING {COLUMNS}"),
        params![name, role.as_str()],
        from_row,
    )?
    .ok_or_else(|| Error::not_found(format!("no user named {name:?}")))
}

/// Deletes a user, their sessions and links with them.
pub fn remove(conn: &mut Conn, name: &str) -> Result<()> {
    conn.transaction(|conn| {
        conn.execute("DELETE FROM sessions WHERE user_name = ?1", params![name])?;
        conn.execute(
            "DELETE FROM sign_in_links WHERE user_name = ?1",
            params![name],
        )?;
        if conn.execute("DELETE FROM users WHERE name = ?1", params![name])? == 0 {
            return Err(Error::not_found(format!("no user named {name:?}")));
        }
        Ok(())
    })
}

/// Records a sign-in.
pub fn signed_in(conn: &Conn, name: &str) -> Result<()> {
    conn.execute(
        "UPDATE users SET last_sign_in_at = ?2 WHERE name = ?1",
        params![name, db::now()],
    )?;
    Ok(())
}

/// Whether anyone can sign in with a password (else a server that requires sign-in offers
/// a link that creates the first admin).
pub fn anyone_has_a_password(conn: &Conn) -> Result<bool> {
    conn.query_one(
        "SELECT EXISTS (SELECT 1 FROM users WHERE password_hash IS NOT NULL)",
        params![],
        |row| row.get(0),
    )
}

/// Users other than `name` holding the admin role.
pub fn other_admins(conn: &Conn, name: &str) -> Result<i64> {
    conn.query_one(
        "SELECT COUNT(*) FROM users WHERE role = 'admin' AND name <> ?1",
        params![name],
        |row| row.get(0),
    )
}

/// The user single sign-on names by `subject` (issuer and subject): created on first sign-in
/// with `role`, their role and groups brought up to date on every later one.
pub fn from_provider(
    conn: &mut Conn,
    subject: &str,
    name: &str,
    role: Role,
    groups: &[String],
) -> Result<User> {
    check_name(name)?;
    let groups = serde_json::to_string(groups).map_err(anyhow::Error::from)?;
    conn.transaction(|conn| {
        let updated = conn.query_opt(
            &format!(
                "UPDATE users SET role = ?2, groups = ?3, last_sign_in_at = ?4 \
                 WHERE subject = ?1 RETURNING {COLUMNS}"
            ),
            params![subject, role.as_str(), groups, db::now()],
            from_row,
        )?;
        if let Some(user) = updated {
            return Ok(user);
        }
        conn.query_opt(
            &format!(
                "INSERT INTO users (name, role, source, subject, groups, created_at, created_by, \
                 last_sign_in_at) VALUES (?1, ?2, 'oidc', ?3, ?4, ?5, 'single sign-on', ?5) \
                 ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
            ),
            params![name, role.as_str(), subject, groups, db::now()],
            from_row,
        )?
        .ok_or_else(|| {
            Error::conflict(format!(
                "the name {name:?} belongs to another user; an admin can rename or remove it"
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn users_are_added_changed_and_removed() {
        each_conn(Backends::Both, |conn| {
            let ada = add(conn, "ada@example.org", Role::Member, "owner").unwrap();
            assert!(!ada.has_password && ada.source == Source::Local);
            assert!(matches!(
                add(conn, "ada@example.org", Role::Admin, "o"),
                Err(Error::Conflict(_))
            ));
            assert!(add(conn, "has space", Role::Admin, "o").is_err());
            assert!(!anyone_has_a_password(conn).unwrap());
            set_password(conn, "ada@example.org", "$argon2id$x").unwrap();
            assert!(anyone_has_a_password(conn).unwrap());
            assert_eq!(
                password_hash(conn, "ada@example.org").unwrap().unwrap(),
                "$argon2id$x"
            );
            assert_eq!(
                set_role(conn, "ada@example.org", Role::Admin).unwrap().role,
                Role::Admin
            );
            assert_eq!(other_admins(conn, "ada@example.org").unwrap(), 0);
            remove(conn, "ada@example.org").unwrap();
            assert!(matches!(
                get(conn, "ada@example.org"),
                Err(Error::NotFound(_))
            ));
        });
    }

    #[test]
    fn single_sign_on_creates_then_updates_by_subject() {
        each_conn(Backends::Both, |conn| {
            let groups = vec!["ops".to_owned()];
            let first =
                from_provider(conn, "https://idp|1", "grace", Role::Operator, &groups).unwrap();
            assert_eq!((first.source, first.role), (Source::Oidc, Role::Operator));
            let again = from_provider(conn, "https://idp|1", "grace", Role::Viewer, &[]).unwrap();
            assert_eq!((again.role, again.groups.len()), (Role::Viewer, 0));
            let err = from_provider(conn, "https://idp|2", "grace", Role::Viewer, &[]).unwrap_err();
            assert!(matches!(err, Error::Conflict(_)), "{err}");
            assert!(password_hash(conn, "grace").unwrap().is_none());
        });
    }
}
