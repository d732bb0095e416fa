//! The audit log: who changed what (every state-changing request of the API, every refused
//! credential), from where, on which replica. Never a body, a query string or a secret.

use serde::Serialize;

use super::Principal;
use crate::db::{self, Conn, Row};
use crate::error::Result;
use crate::params;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = AuditEntry)]
pub struct Entry {
    pub id: String,
    pub at: String,
    /// `owner`, `token:<name>`, a shared token's variable; `null` when nobody was named.
    pub principal: Option<String>,
    pub role: Option<String>,
    /// The method and the route (`PATCH /api/agents/{name}`), or `credential refused`.
    pub action: String,
    /// The path requested.
    pub target: String,
    pub status: u16,
    pub peer: String,
    pub replica: String,
}

/// What an entry says of a request.
pub struct Event<'a> {
    /// When it was answered (unix ms), taken then: entries are written after the answer.
    pub at_ms: i64,
    pub principal: Option<&'a Principal>,
    pub action: &'a str,
    pub target: &'a str,
    pub status: u16,
    pub peer: &'a str,
    pub replica: &'a str,
}

pub fn record(conn: &Conn, event: &Event<'_>) -> Result<()> {
    conn.execute(
        "INSERT INTO audit_log (id, at, at_ms, principal, role, action, target, status, peer, \
         replica) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            uuid::Uuid::new_v4().to_string(),
            chrono::DateTime::from_timestamp_millis(event.at_ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            event.at_ms,
            event.principal.map(Principal::label),
            event.principal.map(|p| p.role.as_str()),
            event.action,
            event.target,
            i64::from(event.status),
            event.peer,
            event.replica
        ],
    )?;
    Ok(())
}

/// Which entries to list: by principal (exact) and action (a prefix), newest first.
#[derive(Default)]
pub struct Filter {
    pub principal: Option<String>,
    pub action: Option<String>,
}

const COLUMNS: &str = "id, at, principal, role, action, target, status, peer, replica";

fn from_row(row: &Row) -> Result<Entry> {
    Ok(Entry {
        id: row.get(0)?,
        at: row.get(1)?,
        principal: row.get(2)?,
        role: row.get(3)?,
        action: row.get(4)?,
        target: row.get(5)?,
        status: u16::try_from(row.get::<i64>(6)?).unwrap_or_default(),
        peer: row.get(7)?,
        replica: row.get(8)?,
    })
}

/// A page of entries and how many match in all.
pub fn list(conn: &Conn, filter: &Filter, limit: u32, offset: u32) -> Result<(Vec<Entry>, i64)> {
    // `... IS NULL OR ...`: one statement whatever is filtered (the cast types the parameter
    // for PostgreSQL).
    let matches = "(CAST(?1 AS TEXT) IS NULL OR principal = ?1) \
                   AND (CAST(?2 AS TEXT) IS NULL OR action LIKE ?2 ESCAPE '\\')";
    let action = filter.action.as_ref().map(|a| {
        let escaped = a
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        format!("{escaped}%")
    });
    let entries = conn.query(
        &format!(
            "SELECT {COLUMNS} FROM audit_log WHERE {matches} \
             ORDER BY at_ms DESC, id LIMIT ?3 OFFSET ?4"
        ),
        params![
            filter.principal,
            action,
            i64::from(limit),
            i64::from(offset)
        ],
        from_row,
    )?;
    let total = conn.query_one(
        &format!("SELECT COUNT(*) FROM audit_log WHERE {matches}"),
        params![filter.principal, action],
        |row| row.get(0),
    )?;
    Ok((entries, total))
}

/// Deletes entries older than `keep_ms` and beyond the newest `max_rows` (with those of the
/// same millisecond as the first one beyond); how many.
pub fn trim(conn: &Conn, keep_ms: i64, max_rows: u64) -> Result<u64> {
    let old = conn.execute(
        "DELETE FROM audit_log WHERE at_ms < ?1",
        params![db::now_ms() - keep_ms],
    )?;
    let over = conn.execute(
        "DELETE FROM audit_log WHERE at_ms <= \
         (SELECT at_ms FROM audit_log ORDER BY at_ms DESC LIMIT 1 OFFSET ?1)",
        params![i64::try_from(max_rows).unwrap_or(i64::MAX)],
    )?;
    Ok(old + over)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::db::testing::{Backends, each_conn};

    fn event<'a>(principal: Option<&'a Principal>, action: &'a str) -> Event<'a> {
        Event {
            at_ms: db::now_ms(),
            principal,
            action,
            target: "/api/agents/x",
            status: 200,
            peer: "10.0.0.9",
            replica: "r1",
        }
    }

    #[test]
    fn entries_are_listed_newest_first_filtered_and_trimmed() {
        each_conn(Backends::Both, |conn| {
            let shared = Principal::shared("SERVICE_MCP_TOKEN", Role::Member);
            record(conn, &event(Some(&shared), "PATCH /api/agents/{name}")).unwrap();
            record(conn, &event(None, "credential refused")).unwrap();
            record(conn, &event(Some(&Principal::owner()), "POST /api/agents")).unwrap();
            // Ages: the refused one 100 s, the shared token's 1 s, the owner's now.
            for (age, action) in [(100_000, "credential refused"), (1_000, "PATCH %")] {
                conn.execute(
                    "UPDATE audit_log SET at_ms = at_ms - ?1 WHERE action LIKE ?2",
                    params![age as i64, action],
                )
                .unwrap();
            }
            let (all, total) = list(conn, &Filter::default(), 10, 0).unwrap();
            assert_eq!(total, 3);
            let order: Vec<_> = all.iter().map(|e| e.principal.as_deref()).collect();
            assert_eq!(order, [Some("owner"), Some("SERVICE_MCP_TOKEN"), None]);
            assert_eq!(all[1].role.as_deref(), Some("member"));
            let owner = Filter {
                principal: Some("owner".into()),
                ..Filter::default()
            };
            assert_eq!(list(conn, &owner, 10, 0).unwrap().1, 1);
            let patches = Filter {
                action: Some("PATCH ".into()),
                ..Filter::default()
            };
            assert_eq!(list(conn, &patches, 10, 0).unwrap().0[0].status, 200);
            let literal = Filter {
                action: Some("credential_".into()),
                ..Filter::default()
            };
            assert_eq!(
                list(conn, &literal, 10, 0).unwrap().1,
                0,
                "_ is no wildcard"
            );
            assert_eq!(trim(conn, 50_000, 1_000).unwrap(), 1, "the old one");
            assert_eq!(trim(conn, 50_000, 1).unwrap(), 1, "past the newest one");
            assert_eq!(
                list(conn, &Filter::default(), 10, 0).unwrap().0[0].action,
                "POST /api/agents"
            );
        });
    }
}
