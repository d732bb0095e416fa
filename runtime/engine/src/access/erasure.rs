//! Forgetting a person (`service-runtime users forget NAME`): their conversations go with their
//! messages, what was written in the runs they asked for (and the runs those delegated to), their
//! tasks' prompts and the notes of the approvals they decided; their account, sessions and links
//! end. What counts stays (the runs' shapes, timings and outcomes, the tasks), and the audit
//! log keeps a tombstone saying who was forgotten, when and by whom.

use serde::Serialize;

use super::{Principal, audit, users};
use crate::db::Conn;
use crate::error::Result;
use crate::{conversations, params, traces};

/// What was forgotten, in numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Forgotten {
    pub conversations: u64,
    pub runs: u64,
    pub tasks: u64,
    pub approvals: u64,
}

/// Forgets the user `name` in one transaction; `by` and `replica` sign the tombstone.
pub fn forget(conn: &mut Conn, name: &str, by: &Principal, replica: &str) -> Result<Forgotten> {
    conn.transaction(|tx| {
        users::get(tx, name)?;
        let label = format!("user:{name}");
        let started: Vec<String> = tx.query(
            "SELECT id FROM conversations WHERE started_by = ?1",
            params![label],
            |r| r.get(0),
        )?;
        for id in &started {
            conversations::delete(tx, id)?;
        }
        let runs =
            traces::erase_content(tx, "SELECT id FROM traces WHERE started_by = ?1", &label)?;
        // The tasks whose titles are prompts (`Task::holds_content`).
        let tasks = tx.execute(
            "UPDATE tasks SET title = '', description = NULL WHERE started_by = ?1 \
             AND agent_profile_name IS NOT NULL AND schedule_name IS NULL",
            params![label],
        )?;
        let approvals = tx.execute(
            "UPDATE approvals SET note = NULL WHERE decided_by = ?1 AND note IS NOT NULL",
            params![label],
        )?;
        users::remove(tx, name)?;
        audit::record(
            tx,
            &audit::Event {
                at_ms: chrono::Utc::now().timestamp_millis(),
                principal: Some(by),
                action: "forget user",
                target: &label,
                status: 200,
                peer: "command line",
                replica,
            },
        )?;
        Ok(Forgotten {
            conversations: started.len() as u64,
            runs,
            tasks,
            approvals,
        })
    })
}
