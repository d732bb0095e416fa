//! Conversations: a dashboard chat, or an adapter's thread, with its messages in order. A turn
//! sends the model the latest earlier messages that fit the history budget (the oldest go
//! first); of an answer's tool calls only the answer's text goes back to the model, the calls
//! themselves are kept with the message for people to read.

use serde::Serialize;
use serde_json::Value;
use service_contract::agent::{self, Turn, TurnRole};

use crate::db::{self, Backend, Conn, Row};
use crate::error::Result;
use crate::{params, traces};

pub mod line;

/// Title length: the start of the first prompt.
const TITLE_CHARS: usize = 80;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Conversation {
    pub id: String,
    pub agent: String,
    pub title: String,
    /// `chat`, or the adapter whose thread it is.
    pub source: String,
    /// Exchanges so far (a prompt and what answered it).
    pub turns: i64,
    pub created_at: String,
    pub updated_at: String,
    /// Who started it (`owner`, `user:<name>`, `token:<name>`); `null` for an adapter's
    /// thread, or one started before v0.14.
    pub started_by: Option<String>,
}

impl Conversation {
    /// Whether `principal` (a label) started it.
    pub fn started_by(&self, principal: &str) -> bool {
        self.started_by.as_deref() == Some(principal)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
    /// The tool calls of an answer, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub tool_calls: Option<Value>,
    pub trace_id: Option<String>,
    pub at: String,
}

/// What a second message of a conversation does while the first is answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DoubleTexting {
    /// Answered after it, seeing its answer.
    #[default]
    Enqueue,
    /// Refused, saying the first is still being answered.
    Reject,
    /// The first is stopped; the second is answered with both in its history.
    Interrupt,
}

/// How much of a conversation goes to the model with a new prompt.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub messages: usize,
    pub chars: usize,
}

const COLUMNS: &str = "id, agent, title, source, turns, created_at, updated_at, started_by";

fn from_row(r: &Row<'_>) -> Result<Conversation> {
    Ok(Conversation {
        id: r.get(0)?,
        agent: r.get(1)?,
        title: r.get(2)?,
        source: r.get(3)?,
        turns: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
        started_by: r.get(7)?,
    })
}

/// A new conversation of `agent`, titled by the prompt that opens it, started by
/// `started_by` (a principal's label).
pub fn start(
    conn: &Conn,
    agent: &str,
    source: &str,
    prompt: &str,
    started_by: Option<&str>,
) -> Result<Conversation> {
    let id = uuid::Uuid::new_v4().to_string();
    let title: String = prompt.trim().chars().take(TITLE_CHARS).collect();
    let now = db::now();
    conn.execute(
        "INSERT INTO conversations (id, agent, title, source, turns, created_at, updated_at, \
         started_by) VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5, ?6)",
        params![id, agent, title, source, now, started_by],
    )?;
    Ok(Conversation {
        id,
        agent: agent.to_owned(),
        title,
        source: source.to_owned(),
        turns: 0,
        created_at: now.clone(),
        updated_at: now,
        started_by: started_by.map(str::to_owned),
    })
}

/// The conversation `source` (an adapter) calls `key`, started with `agent` and titled by
/// `prompt` when it is new (once, when two replicas start it at the same time).
pub fn keyed(
    conn: &Conn,
    source: &str,
    key: &str,
    agent: &str,
    prompt: &str,
) -> Result<Conversation> {
    let found = || {
        conn.query_opt(
            &format!("SELECT {COLUMNS} FROM conversations WHERE source = ?1 AND key = ?2"),
            params![source, key],
            from_row,
        )
    };
    let backend = conn.backend();
    // SQLite answers in process: found first, started when it is not.
    if backend == Backend::Sqlite
        && let Some(conversation) = found()?
    {
        return Ok(conversation);
    }
    let title: String = prompt.trim().chars().take(TITLE_CHARS).collect();
    let now = db::now();
    let start = format!(
        "INSERT INTO conversations (id, agent, title, source, key, turns, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6) ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
    );
    // PostgreSQL: one round trip, which finds the conversation when it was there already.
    let start_or_find = match backend {
        Backend::Sqlite => start,
        Backend::Postgres => format!(
            "WITH started AS ({start}) SELECT {COLUMNS} FROM started UNION ALL \
             SELECT {COLUMNS} FROM conversations WHERE source = ?4 AND key = ?5 \
             AND NOT EXISTS (SELECT 1 FROM started)"
        ),
    };
    // No row back when another replica started it at the same time (after this statement
    // began): then it is found.
    let started = conn.query_opt(
        &start_or_find,
        params![
            uuid::Uuid::new_v4().to_string(),
            agent,
            title,
            source,
            key,
            now
        ],
        from_row,
    )?;
    if let Some(conversation) = started {
        return Ok(conversation);
    }
    found()?.ok_or_else(|| {
        crate::error::Error::Internal(anyhow::anyhow!("a conversation just started is gone"))
    })
}

pub fn get(conn: &Conn, id: &str) -> Result<Option<Conversation>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM conversations WHERE id = ?1"),
        params![id],
        from_row,
    )
}

/// Newest first (by their last message), of one source and one principal who started them
/// when given; with the total.
pub fn list(
    conn: &Conn,
    source: Option<&str>,
    started_by: Option<&str>,
    limit: u32,
    offset: u32,
) -> Result<(Vec<Conversation>, i64)> {
    const WHERE: &str = "WHERE (CAST(?1 AS TEXT) IS NULL OR source = ?1) \
                         AND (CAST(?2 AS TEXT) IS NULL OR started_by = ?2)";
    let conversations = conn.query(
        &format!(
            "SELECT {COLUMNS} FROM conversations {WHERE} \
             ORDER BY updated_at DESC, id LIMIT ?3 OFFSET ?4"
        ),
        params![source, started_by, limit, offset],
        from_row,
    )?;
    let total = conn.query_one(
        &format!("SELECT count(*) FROM conversations {WHERE}"),
        params![source, started_by],
        |r| r.get(0),
    )?;
    Ok((conversations, total))
}

/// Its messages, in order.
pub fn messages(conn: &Conn, id: &str) -> Result<Vec<Message>> {
    conn.query(
        "SELECT role, text, tool_calls, trace_id, at FROM conversation_messages \
         WHERE conversation_id = ?1 ORDER BY seq",
        params![id],
        |r| {
            let tool_calls: Option<String> = r.get(2)?;
            Ok(Message {
                role: r.get(0)?,
                text: r.get(1)?,
                tool_calls: tool_calls.and_then(|calls| serde_json::from_str(&calls).ok()),
                trace_id: r.get(3)?,
                at: r.get(4)?,
            })
        },
    )
}

/// The latest messages that fit `budget`, oldest first, for the model.
pub fn history(conn: &Conn, id: &str, budget: Budget) -> Result<Vec<Turn>> {
    let mut recent = conn.query(
        "SELECT role, text FROM conversation_messages WHERE conversation_id = ?1 \
         ORDER BY seq DESC LIMIT ?2",
        params![id, budget.messages as i64],
        |r| {
            let role: String = r.get(0)?;
            Ok(Turn {
                role: if role == "user" {
                    TurnRole::User
                } else {
                    TurnRole::Assistant
                },
                text: r.get(1)?,
            })
        },
    )?;
    recent.reverse();
    Ok(agent::latest(recent, budget.messages, budget.chars))
}

/// What one exchange adds: the prompt, and the answer when there is one.
pub struct Exchange<'a> {
    pub prompt: &'a str,
    pub answer: Option<&'a str>,
    /// The answer's tool calls, kept for people to read.
    pub tool_calls: Option<&'a Value>,
    pub trace_id: Option<&'a str>,
    /// The turn's ticket, when it leaves the line with this exchange recorded.
    pub leaving: Option<i64>,
}

/// Appends a message (conversation, role, text, tool calls, trace, time), numbered after the
/// last in its statement.
const APPEND: &str = "INSERT INTO conversation_messages \
                      (conversation_id, seq, role, text, tool_calls, trace_id, at) \
                      SELECT ?1, coalesce(max(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6 \
                      FROM conversation_messages WHERE conversation_id = ?1";

/// Appends an exchange's messages, the prompt and its answer when there is one (`?1`
/// conversation, `?2` prompt, `?3` answer, `?4` its tool calls, `?5` trace, `?6` time),
/// numbered after the last. A macro, so PostgreSQL's one statement below can hold it.
macro_rules! append_exchange {
    () => {
        "INSERT INTO conversation_messages \
         (conversation_id, seq, role, text, tool_calls, trace_id, at) \
         SELECT ?1, m.last + v.n, v.role, v.text, v.calls, ?5, ?6 \
         FROM (SELECT coalesce(max(seq), 0) AS last FROM conversation_messages \
               WHERE conversation_id = ?1) m, \
              (SELECT 1 AS n, 'user' AS role, CAST(?2 AS TEXT) AS text, \
                      CAST(NULL AS TEXT) AS calls \
               UNION ALL SELECT 2, 'assistant', CAST(?3 AS TEXT), CAST(?4 AS TEXT)) v \
         WHERE v.text IS NOT NULL"
    };
}

/// Moves the conversation to the top of the list, one turn more (the parameters as above).
macro_rules! turned {
    () => {
        "UPDATE conversations SET turns = turns + 1, updated_at = ?6 WHERE id = ?1"
    };
}

/// [`record`] on PostgreSQL: one statement (atomic as such), `?7` the ticket leaving the line
/// or null.
const RECORD_IN_ONE: &str = concat!(
    "WITH appended AS (",
    append_exchange!(),
    "), turned AS (",
    turned!(),
    ") DELETE FROM conversation_turns WHERE conversation_id = ?1 AND ticket = ?7"
);

/// Appends an exchange (the prompt, and its answer when there is one: both in one statement),
/// moves the conversation to the top of the list and, when its turn is `leaving`, leaves the
/// line, atomically: one statement on PostgreSQL, a transaction on SQLite.
pub fn record(conn: &mut Conn, id: &str, exchange: &Exchange<'_>) -> Result<()> {
    let calls = exchange
        .tool_calls
        .filter(|calls| calls.as_array().is_some_and(|a| !a.is_empty()))
        .map(Value::to_string);
    let now = db::now();
    let (prompt, answer, trace) = (exchange.prompt, exchange.answer, exchange.trace_id);
    if conn.backend() == Backend::Postgres {
        let leaving = exchange.leaving;
        let params = params![id, prompt, answer, calls, trace, now, leaving];
        conn.execute(RECORD_IN_ONE, params)?;
        return Ok(());
    }
    conn.transaction(|tx| {
        let params = params![id, prompt, answer, calls, trace, now];
        tx.execute(append_exchange!(), params)?;
        tx.execute(turned!(), params)?;
        if let Some(ticket) = exchange.leaving {
            tx.execute(LEAVE, params![id, ticket])?;
        }
        Ok(())
    })
}

/// Appends an answer that came after its prompt was recorded (a run that paused for a
/// person's approval), and moves the conversation to the top of the list.
pub fn answer(
    conn: &mut Conn,
    id: &str,
    text: &str,
    tool_calls: &Value,
    trace_id: &str,
) -> Result<()> {
    conn.transaction(|tx| {
        let now = db::now();
        let calls = Some(tool_calls)
            .filter(|calls| calls.as_array().is_some_and(|a| !a.is_empty()))
            .map(Value::to_string);
        tx.execute(APPEND, params![id, "assistant", text, calls, trace_id, now])?;
        tx.execute(
            "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
            params![id, now],
        )?;
        Ok(())
    })
}

/// A place in a conversation's line (turns are answered one at a time, in the order they
/// took their tickets, whichever replica they came to): its ticket and how many live turns
/// are ahead of it, or `None` when `alone` was asked and another turn is under way or
/// waiting. It holds for `lease_ms` unless renewed; a dead replica's tickets expire and are
/// cleared by the next arrival.
pub(crate) fn queue(
    conn: &mut Conn,
    id: &str,
    holder: &str,
    lease_ms: i64,
    alone: bool,
) -> Result<Option<Queued>> {
    if conn.backend() == Backend::Postgres {
        // `conversation_queue` (migration 27) is this transaction in one statement.
        let (ticket, ahead): (Option<i64>, i64) = conn.query_one(
            "SELECT taken, ahead FROM conversation_queue(?1, ?2, ?3, ?4)",
            params![id, holder, lease_ms, alone],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        return Ok(ticket.map(|ticket| Queued { ticket, ahead }));
    }
    conn.transaction(|tx| {
        let now = tx.clock_ms();
        tx.execute(
            &format!(
                "DELETE FROM conversation_turns WHERE conversation_id = ?1 AND lease_until < {now}"
            ),
            params![id],
        )?;
        // Every live turn is ahead of the one taking its ticket now.
        let ahead: i64 = tx.query_one(
            "SELECT count(*) FROM conversation_turns WHERE conversation_id = ?1",
            params![id],
            |r| r.get(0),
        )?;
        if alone && ahead > 0 {
            return Ok(None);
        }
        // Never given out twice, so a ticket that expired under a slow holder stays its own.
        let ticket: i64 = tx.query_one(
            "UPDATE conversations SET tickets = tickets + 1 WHERE id = ?1 RETURNING tickets",
            params![id],
            |r| r.get(0),
        )?;
        tx.execute(
            &format!(
                "INSERT INTO conversation_turns (conversation_id, ticket, holder, lease_until) \
                 VALUES (?1, ?2, ?3, {now} + ?4)"
            ),
            params![id, ticket, holder, lease_ms],
        )?;
        Ok(Some(Queued { ticket, ahead }))
    })
}

/// A ticket just taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Queued {
    pub ticket: i64,
    /// Live turns ahead of it then.
    pub ahead: i64,
}

/// How many live turns wait or run ahead of `ticket`.
pub(crate) fn ahead(conn: &Conn, id: &str, ticket: i64) -> Result<i64> {
    conn.query_one(
        &format!(
            "SELECT count(*) FROM conversation_turns WHERE conversation_id = ?1 AND ticket < ?2 \
             AND lease_until >= {}",
            conn.clock_ms()
        ),
        params![id, ticket],
        |r| r.get(0),
    )
}

/// Keeps a ticket for another `lease_ms`.
pub(crate) fn renew(conn: &Conn, id: &str, ticket: i64, lease_ms: i64) -> Result<()> {
    conn.execute(
        &format!(
            "UPDATE conversation_turns SET lease_until = {} + ?3 \
             WHERE conversation_id = ?1 AND ticket = ?2",
            conn.clock_ms()
        ),
        params![id, ticket, lease_ms],
    )?;
    Ok(())
}

const LEAVE: &str = "DELETE FROM conversation_turns WHERE conversation_id = ?1 AND ticket = ?2";

/// Leaves the line.
pub(crate) fn leave(conn: &Conn, id: &str, ticket: i64) -> Result<()> {
    conn.execute(LEAVE, params![id, ticket])?;
    Ok(())
}

/// Deletes a conversation, its messages, what was written in its runs' traces and the
/// approvals its runs went on from (their checkpoints hold the messages; one still pending
/// stays until it is decided or expires); whether it was there.
pub fn delete(conn: &Conn, id: &str) -> Result<bool> {
    traces::erase_content(
        conn,
        "SELECT trace_id FROM conversation_messages WHERE conversation_id = ?1 \
         AND trace_id IS NOT NULL",
        id,
    )?;
    conn.execute(
        "DELETE FROM approvals WHERE conversation_id = ?1 AND resumed = 1",
        params![id],
    )?;
    conn.execute(
        "DELETE FROM conversation_messages WHERE conversation_id = ?1",
        params![id],
    )?;
    conn.execute(
        "DELETE FROM conversation_turns WHERE conversation_id = ?1",
        params![id],
    )?;
    Ok(conn.execute("DELETE FROM conversations WHERE id = ?1", params![id])? > 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn deleting_erases_what_its_runs_and_their_delegations_wrote() {
        each_conn(Backends::Both, |conn| {
            let run = |conn: &Conn, parent: Option<&str>, prompt: &str| {
                traces::start(
                    conn,
                    &traces::NewTrace {
                        id: None,
                        parent_trace_id: parent,
                        source: "chat",
                        provider: "offline",
                        model: "offline-1",
                        prompt,
                        ..traces::NewTrace::default()
                    },
                )
                .unwrap()
            };
            let asked = run(conn, None, "ada's question");
            let delegated = run(conn, Some(&asked), "ada's question, passed on");
            let other = run(conn, None, "someone else's");
            let chat = start(conn, "default", "chat", "hi", Some("user:ada")).unwrap();
            let exchange = Exchange {
                prompt: "ada's question",
                answer: Some("the answer"),
                tool_calls: None,
                trace_id: Some(&asked),
                leaving: None,
            };
            record(conn, &chat.id, &exchange).unwrap();

            assert!(delete(conn, &chat.id).unwrap());
            for id in [&asked, &delegated] {
                let trace = traces::get(conn, id).unwrap().unwrap();
                assert_eq!(
                    (trace.prompt.as_str(), trace.status.as_str()),
                    ("", "running")
                );
            }
            let kept = traces::get(conn, &other).unwrap().unwrap();
            assert_eq!(kept.prompt, "someone else's");
            assert!(!delete(conn, &chat.id).unwrap(), "gone");
        });
    }

    #[test]
    fn exchanges_are_kept_in_order_and_the_history_keeps_the_latest() {
        each_conn(Backends::Both, |conn| {
            let chat = start(
                conn,
                "default",
                "chat",
                "  What is the plan for the week?  ",
                Some("user:ada"),
            )
            .unwrap();
            assert_eq!(chat.title, "What is the plan for the week?");
            let calls = json!([{"name": "search_notes"}]);
            for n in 0..3 {
                record(
                    conn,
                    &chat.id,
                    &Exchange {
                        prompt: &format!("question {n}"),
                        answer: Some(&format!("answer {n}")),
                        tool_calls: Some(&calls),
                        trace_id: Some("t1"),
                        leaving: None,
                    },
                )
                .unwrap();
            }
            record(
                conn,
                &chat.id,
                &Exchange {
                    prompt: "unanswered",
                    answer: None,
                    tool_calls: None,
                    trace_id: None,
                    leaving: None,
                },
            )
            .unwrap();
            let kept = messages(conn, &chat.id).unwrap();
            assert_eq!(kept.len(), 7);
            assert_eq!(
                (kept[1].role.as_str(), kept[1].text.as_str()),
                ("assistant", "answer 0")
            );
            assert_eq!(kept[1].tool_calls, Some(calls.clone()));
            assert_eq!(get(conn, &chat.id).unwrap().unwrap().turns, 4);

            let budget = Budget {
                messages: 3,
                chars: 1_000,
            };
            let recent = history(conn, &chat.id, budget).unwrap();
            let texts: Vec<&str> = recent.iter().map(|t| t.text.as_str()).collect();
            assert_eq!(texts, ["question 2", "answer 2", "unanswered"]);
            let tight = Budget {
                messages: 10,
                chars: 20,
            };
            assert_eq!(history(conn, &chat.id, tight).unwrap().len(), 2);

            // An adapter's thread: found again by its key, started once.
            let thread = keyed(conn, "email", "t1@example.org", "default", "Lunch?").unwrap();
            let again = keyed(conn, "email", "t1@example.org", "other", "Re: Lunch?").unwrap();
            assert_eq!(
                (again.id.as_str(), again.title.as_str()),
                (thread.id.as_str(), "Lunch?")
            );
            let elsewhere = keyed(conn, "guildchat", "t1@example.org", "default", "x").unwrap();
            assert_ne!(elsewhere.id, thread.id, "keys are per adapter");
            assert!(delete(conn, &thread.id).unwrap() && delete(conn, &elsewhere.id).unwrap());
            let other = start(conn, "default", "teamchat", "hello", None).unwrap();
            let (all, total) = list(conn, None, None, 10, 0).unwrap();
            assert_eq!((all.len(), total), (2, 2));
            let (mine, _) = list(conn, Some("teamchat"), None, 10, 0).unwrap();
            assert_eq!(mine[0].id, other.id);
            let (adas, total) = list(conn, None, Some("user:ada"), 10, 0).unwrap();
            assert_eq!((adas[0].id.as_str(), total), (chat.id.as_str(), 1));
            assert!(adas[0].started_by("user:ada") && !other.started_by("user:ada"));
            // The line: in arrival order, and a turn that asks to be alone is refused while
            // another waits or runs.
            let first = queue(conn, &chat.id, "r1", 60_000, false).unwrap().unwrap();
            let second = queue(conn, &chat.id, "r2", 60_000, false).unwrap().unwrap();
            assert_eq!((first.ahead, second.ahead), (0, 1));
            let (first, second) = (first.ticket, second.ticket);
            assert_eq!(
                (
                    ahead(conn, &chat.id, first).unwrap(),
                    ahead(conn, &chat.id, second).unwrap()
                ),
                (0, 1)
            );
            assert_eq!(queue(conn, &chat.id, "r3", 60_000, true).unwrap(), None);
            // A turn leaves the line as its exchange is recorded.
            let exchange = Exchange {
                prompt: "first in line",
                answer: Some("answered"),
                tool_calls: None,
                trace_id: None,
                leaving: Some(first),
            };
            record(conn, &chat.id, &exchange).unwrap();
            assert_eq!(ahead(conn, &chat.id, second).unwrap(), 0);
            // A ticket no one renews expires.
            renew(conn, &chat.id, second, -1).unwrap();
            let alone = Queued {
                ticket: 3,
                ahead: 0,
            };
            assert_eq!(
                queue(conn, &chat.id, "r3", 60_000, true).unwrap(),
                Some(alone)
            );

            assert!(delete(conn, &chat.id).unwrap());
            assert!(!delete(conn, &chat.id).unwrap());
            assert!(messages(conn, &chat.id).unwrap().is_empty());
        });
    }
}
