//! Approvals: a run paused before a tool call configured with `[tools.<name>] approval = true`
//! waits here for a person. The row keeps the paused run (its checkpoint, owned by the
//! engine), so the decision may come after a restart and any replica may go on with it.

use serde::Serialize;
use serde_json::Value;

use crate::db::{self, Conn, Row};
use crate::error::Result;
use crate::params;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Approval {
    pub id: String,
    pub tool: String,
    /// The tool call's input, as the model gave it.
    pub input: Value,
    pub agent: String,
    pub conversation_id: Option<String>,
    pub task_id: Option<String>,
    pub trace_id: String,
    /// What started the run: an adapter's name, `chat`, `scheduler`, ... (`null` for
    /// approvals recorded before this was kept).
    pub source: Option<String>,
    /// `pending`, `approved`, `denied`, or `expired` (no decision in time: a denial).
    #[schema(pattern = "^(pending|approved|denied|expired)$")]
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub note: Option<String>,
    pub requested_at: String,
    pub decided_at: Option<String>,
    /// Who decided: `owner`, `token:<name>`, `adapter:<name>` (the chat platform's user is
    /// the adapter's to record); `null` while pending, when it expired, or before v0.14.
    pub decided_by: Option<String>,
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    fn status(self) -> &'static str {
        match self {
            Self::Approve => "approved",
            Self::Deny => "denied",
        }
    }
}

/// What [`decide`] did.
#[derive(Debug, PartialEq)]
pub enum Decided {
    Now(Approval),
    /// Already decided (or expired): nothing changed.
    Before(Approval),
    Unknown,
}

/// A paused run to ask about.
pub struct NewApproval<'a> {
    pub tool: &'a str,
    pub input: &'a Value,
    pub agent: &'a str,
    pub conversation_id: Option<&'a str>,
    pub task_id: Option<&'a str>,
    pub trace_id: &'a str,
    pub source: &'a str,
    pub checkpoint: &'a Value,
}

/// A decided approval a replica has claimed to go on with.
pub struct Claimed {
    pub approval: Approval,
    pub checkpoint: Value,
    /// The approved tool was started by an earlier claim that did not finish.
    pub tool_started: bool,
}

const COLUMNS: &str = "id, tool, input, agent, conversation_id, task_id, trace_id, status, note, \
                       requested_at, decided_at, source, decided_by";

fn from_row(r: &Row<'_>) -> Result<Approval> {
    let input: String = r.get(2)?;
    Ok(Approval {
        id: r.get(0)?,
        tool: r.get(1)?,
        input: serde_json::from_str(&input).unwrap_or(Value::Null),
        agent: r.get(3)?,
        conversation_id: r.get(4)?,
        task_id: r.get(5)?,
        trace_id: r.get(6)?,
        status: r.get(7)?,
        note: r.get(8)?,
        requested_at: r.get(9)?,
        decided_at: r.get(10)?,
        source: r.get(11)?,
        decided_by: r.get(12)?,
    })
}

/// Records a pause; its id.
pub fn request(conn: &Conn, new: &NewApproval<'_>) -> Result<String> {
    let id = uuid::Uuid::new_v4().to_string();
    conn.execute(
        &format!(
            "INSERT INTO approvals (id, tool, input, agent, conversation_id, task_id, trace_id, \
             requested_at, requested_ms, checkpoint, source) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, {}, ?9, ?10)",
            conn.clock_ms()
        ),
        params![
            id,
            new.tool,
            new.input.to_string(),
            new.agent,
            new.conversation_id,
            new.task_id,
            new.trace_id,
            db::now(),
            new.checkpoint.to_string(),
            new.source
        ],
    )?;
    Ok(id)
}

pub fn get(conn: &Conn, id: &str) -> Result<Option<Approval>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
        params![id],
        from_row,
    )
}

/// Newest first, of one status when given, of the conversations one principal started when
/// given; at most `limit`.
pub fn list(
    conn: &Conn,
    status: Option<&str>,
    started_by: Option<&str>,
    limit: u32,
) -> Result<Vec<Approval>> {
    conn.query(
        &format!(
            "SELECT {COLUMNS} FROM approvals WHERE (CAST(?1 AS TEXT) IS NULL OR status = ?1) \
             AND (CAST(?2 AS TEXT) IS NULL OR conversation_id IN \
                 (SELECT id FROM conversations WHERE started_by = ?2)) \
             ORDER BY requested_at DESC, id LIMIT ?3"
        ),
        params![status, started_by, limit],
        from_row,
    )
}

/// The approval task `task` waits for, if any.
pub fn pending_for_task(conn: &Conn, task: &str) -> Result<Option<Approval>> {
    conn.query_opt(
        &format!(
            "SELECT {COLUMNS} FROM approvals WHERE task_id = ?1 AND status = 'pending' \
             ORDER BY requested_at DESC LIMIT 1"
        ),
        params![task],
        from_row,
    )
}

/// Decides a pending approval once; a second decision changes nothing.
pub fn decide(
    conn: &Conn,
    id: &str,
    decision: Decision,
    note: Option<&str>,
    by: &str,
) -> Result<Decided> {
    let changed = conn.execute(
        "UPDATE approvals SET status = ?2, note = ?3, decided_at = ?4, decided_by = ?5 \
         WHERE id = ?1 AND status = 'pending'",
        params![id, decision.status(), note, db::now(), by],
    )?;
    Ok(match (changed, get(conn, id)?) {
        (_, None) => Decided::Unknown,
        (0, Some(approval)) => Decided::Before(approval),
        (_, Some(approval)) => Decided::Now(approval),
    })
}

/// [`decide`], for an approval of a run `source` started: another's is `Unknown`.
pub fn decide_for(
    conn: &Conn,
    id: &str,
    source: &str,
    decision: Decision,
    note: Option<&str>,
) -> Result<Decided> {
    match get(conn, id)? {
        Some(approval) if approval.source.as_deref() == Some(source) => {
            decide(conn, id, decision, note, &format!("adapter:{source}"))
        }
        _ => Ok(Decided::Unknown),
    }
}

/// Denies what `task`'s run waits for, noting why; how many.
pub fn deny_for_task(conn: &Conn, task: &str, note: &str) -> Result<u64> {
    conn.execute(
        "UPDATE approvals SET status = 'denied', note = ?2, decided_at = ?3 \
         WHERE task_id = ?1 AND status = 'pending'",
        params![task, note, db::now()],
    )
}

/// Expires what waited longer than `timeout_ms`; how many.
pub fn expire(conn: &Conn, timeout_ms: i64) -> Result<u64> {
    conn.execute(
        &format!(
            "UPDATE approvals SET status = 'expired', decided_at = ?1 \
             WHERE status = 'pending' AND requested_ms < {} - ?2",
            conn.clock_ms()
        ),
        params![db::now(), timeout_ms],
    )
}

/// Claims one decided approval whose run has not gone on (and that no live claim holds) for
/// `holder`, for `lease_ms` unless renewed.
pub fn claim(conn: &mut Conn, holder: &str, lease_ms: i64) -> Result<Option<Claimed>> {
    conn.transaction(|tx| {
        let now = tx.clock_ms();
        let id: Option<String> = tx.query_opt(
            &format!(
                "SELECT id FROM approvals WHERE status != 'pending' AND resumed = 0 \
                 AND (claim_until IS NULL OR claim_until < {now}) ORDER BY decided_at LIMIT 1"
            ),
            params![],
            |r| r.get(0),
        )?;
        let Some(id) = id else { return Ok(None) };
        let taken = tx.execute(
            &format!(
                "UPDATE approvals SET claimed_by = ?2, claim_until = {now} + ?3 WHERE id = ?1 \
                 AND resumed = 0 AND (claim_until IS NULL OR claim_until < {now})"
            ),
            params![id, holder, lease_ms],
        )?;
        if taken == 0 {
            return Ok(None);
        }
        let (checkpoint, tool_started): (String, i64) = tx.query_one(
            "SELECT checkpoint, tool_started FROM approvals WHERE id = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Some(Claimed {
            approval: get(tx, &id)?.expect("claimed in this transaction"),
            checkpoint: serde_json::from_str(&checkpoint)
                .map_err(|e| crate::error::Error::Internal(e.into()))?,
            tool_started: tool_started != 0,
        }))
    })
}

/// Keeps a claim for another `lease_ms`.
pub fn renew(conn: &Conn, id: &str, holder: &str, lease_ms: i64) -> Result<()> {
    conn.execute(
        &format!(
            "UPDATE approvals SET claim_until = {} + ?3 WHERE id = ?1 AND claimed_by = ?2",
            conn.clock_ms()
        ),
        params![id, holder, lease_ms],
    )?;
    Ok(())
}

/// Gives a claim up at once (a replica that stops), so another need not wait for it to lapse.
pub fn release(conn: &Conn, id: &str, holder: &str) -> Result<()> {
    conn.execute(
        "UPDATE approvals SET claim_until = NULL WHERE id = ?1 AND claimed_by = ?2",
        params![id, holder],
    )?;
    Ok(())
}

/// Notes that the approved tool is about to run, so a claim cut short does not run it again.
pub fn tool_started(conn: &Conn, id: &str) -> Result<()> {
    conn.execute(
        "UPDATE approvals SET tool_started = 1 WHERE id = ?1",
        params![id],
    )?;
    Ok(())
}

/// The run went past this approval (to its end, or to its next pause): where it got to, and
/// the task of the job queued for its adapter, when one was.
pub fn resumed(conn: &Conn, id: &str, outcome: &Value, then_task: Option<&str>) -> Result<()> {
    conn.execute(
        "UPDATE approvals SET resumed = 1, claim_until = NULL, outcome = ?2, then_task = ?3 \
         WHERE id = ?1",
        params![id, outcome.to_string(), then_task],
    )?;
    Ok(())
}

/// Where the run went once `source`'s approval was decided, read from the job queued for it
/// (`then_task`); `None` when no approval of `source` queued that job.
pub fn went_on(conn: &Conn, then_task: &str, source: &str) -> Result<Option<Value>> {
    let outcome: Option<Option<String>> = conn.query_opt(
        "SELECT outcome FROM approvals WHERE then_task = ?1 AND source = ?2",
        params![then_task, source],
        |r| r.get(0),
    )?;
    Ok(outcome
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok()))
}

/// Pending approvals, for the dashboard's badge.
pub fn pending_count(conn: &Conn) -> Result<i64> {
    conn.query_one(
        "SELECT count(*) FROM approvals WHERE status = 'pending'",
        params![],
        |r| r.get(0),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn decided_once_claimed_once_and_expired_in_time() {
        each_conn(Backends::Both, |conn| {
            let input = json!({"title": "x"});
            let new = NewApproval {
                tool: "create_note",
                input: &input,
                agent: "default",
                conversation_id: Some("c1"),
                task_id: None,
                trace_id: "t1",
                source: "teamchat",
                checkpoint: &json!({"step": 1}),
            };
            let id = request(conn, &new).unwrap();
            assert_eq!(pending_count(conn).unwrap(), 1);
            assert!(claim(conn, "r1", 60_000).unwrap().is_none(), "undecided");
            let Decided::Now(decided) =
                decide(conn, &id, Decision::Approve, Some("fine"), "token:ops").unwrap()
            else {
                panic!("first decision")
            };
            assert_eq!(
                (
                    decided.status.as_str(),
                    decided.note.as_deref(),
                    decided.decided_by.as_deref()
                ),
                ("approved", Some("fine"), Some("token:ops"))
            );
            assert!(matches!(
                decide(conn, &id, Decision::Deny, None, "owner").unwrap(),
                Decided::Before(a) if a.status == "approved" && a.decided_by.as_deref() == Some("token:ops")
            ));
            assert_eq!(
                decide(conn, "nope", Decision::Deny, None, "owner").unwrap(),
                Decided::Unknown
            );

            let claimed = claim(conn, "r1", 60_000).unwrap().unwrap();
            assert_eq!(claimed.checkpoint, json!({"step": 1}));
            assert!(!claimed.tool_started);
            assert!(claim(conn, "r2", 60_000).unwrap().is_none(), "held by r1");
            tool_started(conn, &id).unwrap();
            renew(conn, &id, "r1", -1).unwrap();
            let again = claim(conn, "r2", 60_000).unwrap().unwrap();
            assert!(again.tool_started, "a lapsed claim is taken over");
            resumed(conn, &id, &json!({"state": "answered"}), Some("job-1")).unwrap();
            assert!(claim(conn, "r3", 60_000).unwrap().is_none());
            assert_eq!(
                went_on(conn, "job-1", "teamchat").unwrap(),
                Some(json!({"state": "answered"}))
            );
            assert_eq!(
                went_on(conn, "job-1", "webhook").unwrap(),
                None,
                "not its own"
            );
            assert_eq!(went_on(conn, "job-2", "teamchat").unwrap(), None);

            let late = request(conn, &new).unwrap();
            assert_eq!(expire(conn, 60_000).unwrap(), 0);
            assert_eq!(expire(conn, -1).unwrap(), 1);
            assert_eq!(get(conn, &late).unwrap().unwrap().status, "expired");
            assert_eq!(list(conn, Some("pending"), None, 10).unwrap().len(), 0);
            assert_eq!(list(conn, None, None, 10).unwrap().len(), 2);
            assert_eq!(list(conn, None, Some("user:nobody"), 10).unwrap().len(), 0);
        });
    }
}
