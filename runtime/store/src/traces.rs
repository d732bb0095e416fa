//! Traces: one record per agent run, with a row per LLM call and per tool invocation.
//! A trace is written when the run starts (status `running`) and finished with `ok` or
//! `error`, so a run that dies half way still leaves a record.

use serde::Serialize;
use serde_json::Value;

use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Trace {
    pub id: String,
    pub parent_trace_id: Option<String>,
    pub agent_profile_name: Option<String>,
    /// Where the run came from: `chat`, an adapter name, `scheduler`, ...
    pub source: String,
    /// Who asked for it: `owner`, `user:<name>`, `token:<name>`; null for an adapter's or a
    /// schedule's run.
    pub started_by: Option<String>,
    pub provider: String,
    pub model: String,
    pub prompt: String,
    pub response: Option<String>,
    /// `running`, `ok` or `error`.
    pub status: String,
    pub error_message: Option<String>,
    /// Notes about the run that did not stop it, e.g. a listed tool that is not registered.
    pub warnings: Vec<String>,
    pub latency_ms: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

/// One step of a run, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    LlmCall {
        step: i64,
        provider: String,
        model: String,
        status: String,
        error_message: Option<String>,
        response_text: Option<String>,
        input_tokens: Option<i64>,
        output_tokens: Option<i64>,
        started_at: String,
        latency_ms: i64,
    },
    ToolInvocation {
        step: i64,
        call_id: Option<String>,
        tool_name: String,
        input: Value,
        output: Option<String>,
        status: String,
        error_message: Option<String>,
        started_at: String,
        latency_ms: i64,
    },
}

impl Trace {
    /// The trace without what people and models wrote: the prompt (empty) and the response.
    pub fn without_content(self) -> Self {
        Self {
            prompt: String::new(),
            response: None,
            ..self
        }
    }
}

impl Step {
    /// The step without what people, models and tools wrote: texts, inputs, outputs, errors.
    pub fn without_content(self) -> Self {
        match self {
            Self::LlmCall {
                step,
                provider,
                model,
                status,
                input_tokens,
                output_tokens,
                started_at,
                latency_ms,
                ..
            } => Self::LlmCall {
                step,
                provider,
                model,
                status,
                error_message: None,
                response_text: None,
                input_tokens,
                output_tokens,
                started_at,
                latency_ms,
            },
            Self::ToolInvocation {
                step,
                call_id,
                tool_name,
                status,
                started_at,
                latency_ms,
                ..
            } => Self::ToolInvocation {
                step,
                call_id,
                tool_name,
                input: Value::Null,
                output: None,
                status,
                error_message: None,
                started_at,
                latency_ms,
            },
        }
    }

    fn position(&self) -> i64 {
        match self {
            Self::LlmCall { step, .. } | Self::ToolInvocation { step, .. } => *step,
        }
    }
}

#[derive(Debug, Default)]
pub struct NewTrace<'a> {
    /// Its id when the caller named it beforehand (a run started through the API); a new
    /// one otherwise.
    pub id: Option<&'a str>,
    pub parent_trace_id: Option<&'a str>,
    pub agent_profile_name: Option<&'a str>,
    pub source: &'a str,
    /// Who asked for the run (see `RunRequest::started_by`).
    pub started_by: Option<&'a str>,
    pub provider: &'a str,
    pub model: &'a str,
    pub prompt: &'a str,
    /// The replica running it.
    pub runner: Option<&'a str>,
    /// What the run goes without (a tool its profile names that is not offered, say).
    pub warnings: &'a [String],
}

/// How a run ended. `error: Some(..)` makes the trace's status `error`.
#[derive(Debug, Default)]
pub struct Outcome<'a> {
    pub response: Option<&'a str>,
    pub error: Option<&'a str>,
    pub latency_ms: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
}

#[derive(Debug, Default)]
pub struct LlmCall<'a> {
    pub step: i64,
    pub provider: &'a str,
    pub model: &'a str,
    pub error: Option<&'a str>,
    pub response_text: Option<&'a str>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub started_at: &'a str,
    pub latency_ms: i64,
}

#[derive(Debug, Default)]
pub struct ToolInvocation<'a> {
    pub step: i64,
    pub call_id: Option<&'a str>,
    pub tool_name: &'a str,
    pub input: &'a Value,
    pub output: Option<&'a str>,
    pub error: Option<&'a str>,
    pub started_at: &'a str,
    pub latency_ms: i64,
}

fn status_of(error: Option<&str>) -> &'static str {
    if error.is_some() { "error" } else { "ok" }
}

/// Records the start of a run and returns its trace id.
pub fn start(conn: &Conn, trace: &NewTrace<'_>) -> Result<String> {
    let id = trace
        .id
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let warnings = if trace.warnings.is_empty() {
        None
    } else {
        Some(serde_json::to_string(trace.warnings).map_err(anyhow::Error::from)?)
    };
    conn.execute_later(
        "INSERT INTO traces (id, parent_trace_id, agent_profile_name, source, provider, model, \
         prompt, status, created_at, runner, started_by, warnings) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, ?10, ?11)",
        params![
            id,
            trace.parent_trace_id,
            trace.agent_profile_name,
            trace.source,
            trace.provider,
            trace.model,
            trace.prompt,
            db::now(),
            trace.runner,
            trace.started_by,
            warnings
        ],
    )?;
    Ok(id)
}

pub fn record_llm_call(conn: &Conn, trace_id: &str, call: &LlmCall<'_>) -> Result<()> {
    conn.execute_later(
        "INSERT INTO llm_calls (trace_id, step, provider, model, status, error_message, \
         response_text, input_tokens, output_tokens, started_at, latency_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            trace_id,
            call.step,
            call.provider,
            call.model,
            status_of(call.error),
            call.error,
            call.response_text,
            call.input_tokens,
            call.output_tokens,
            call.started_at,
            call.latency_ms
        ],
    )?;
    Ok(())
}

pub fn record_tool_invocation(
    conn: &Conn,
    trace_id: &str,
    call: &ToolInvocation<'_>,
) -> Result<()> {
    conn.execute_later(
        "INSERT INTO tool_invocations (trace_id, step, call_id, tool_name, input, output, status, \
         error_message, started_at, latency_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            trace_id,
            call.step,
            call.call_id,
            call.tool_name,
            call.input.to_string(),
            call.output,
            status_of(call.error),
            call.error,
            call.started_at,
            call.latency_ms
        ],
    )?;
    Ok(())
}

/// The most warnings a trace keeps; past them, adding one is a conflict.
pub(crate) const MAX_WARNINGS: usize = 32;

/// Adds a warning to a trace of `source` after the run (an adapter noting its reply was not
/// delivered); a trace of another source is not found, and a trace with [`MAX_WARNINGS`]
/// already takes no more.
pub fn add_warning(conn: &mut Conn, trace_id: &str, source: &str, warning: &str) -> Result<()> {
    conn.transaction(|tx| {
        let stored: Option<String> = tx
            .query_opt(
                "SELECT warnings FROM traces WHERE id = ?1 AND source = ?2",
                params![trace_id, source],
                |r| r.get(0),
            )?
            .ok_or_else(|| Error::not_found(format!("no trace {trace_id:?} of {source}")))?;
        let mut warnings: Vec<String> = stored
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default();
        if warnings.len() >= MAX_WARNINGS {
            return Err(Error::conflict(format!(
                "the trace has {MAX_WARNINGS} warnings already, the most it keeps"
            )));
        }
        warnings.push(warning.to_owned());
        let json = serde_json::to_string(&warnings).map_err(anyhow::Error::from)?;
        tx.execute(
            "UPDATE traces SET warnings = ?2 WHERE id = ?1",
            params![trace_id, json],
        )?;
        Ok(())
    })
}

/// Marks a run finished.
pub fn finish(conn: &Conn, trace_id: &str, outcome: &Outcome<'_>) -> Result<()> {
    let changed = conn.execute(
        "UPDATE traces SET response = ?2, status = ?3, error_message = ?4, latency_ms = ?5, \
         input_tokens = ?6, output_tokens = ?7, finished_at = ?8 WHERE id = ?1",
        params![
            trace_id,
            outcome.response,
            status_of(outcome.error),
            outcome.error,
            outcome.latency_ms,
            outcome.input_tokens,
            outcome.output_tokens,
            db::now()
        ],
    )?;
    if changed == 0 {
        return Err(Error::not_found(format!("no trace {trace_id:?}")));
    }
    Ok(())
}

/// Runs cannot survive their process: traces left running by a replica that stopped are
/// failed (see `tasks::fail_orphaned` for which), except those of runs paused for an approval,
/// which go on once it is decided.
pub fn fail_orphaned(conn: &Conn, restarted: Option<&str>) -> Result<u64> {
    conn.execute(
        &format!(
            "UPDATE traces SET status = 'error', error_message = CASE WHEN runner IS NULL \
             OR runner = ?2 THEN 'interrupted by restart' ELSE 'interrupted: its replica ' || \
             runner || ' stopped' END, finished_at = ?1 WHERE status = 'running' \
             AND id NOT IN (SELECT trace_id FROM approvals WHERE resumed = 0) \
             AND ((runner IS NULL AND CAST(?2 AS TEXT) IS NOT NULL) OR runner = ?2 \
               OR (runner IS NOT NULL AND NOT EXISTS (SELECT 1 FROM leases \
                 WHERE name = 'replica:' || traces.runner AND expires_at >= {})))",
            conn.clock_ms()
        ),
        params![db::now(), restarted],
    )
}

const COLUMNS: &str = "id, parent_trace_id, agent_profile_name, source, provider, model, prompt, \
    response, status, error_message, latency_ms, input_tokens, output_tokens, created_at, \
    finished_at, warnings, started_by";

fn from_row(row: &Row<'_>) -> Result<Trace> {
    Ok(Trace {
        id: row.get(0)?,
        parent_trace_id: row.get(1)?,
        agent_profile_name: row.get(2)?,
        source: row.get(3)?,
        provider: row.get(4)?,
        model: row.get(5)?,
        prompt: row.get(6)?,
        response: row.get(7)?,
        status: row.get(8)?,
        error_message: row.get(9)?,
        latency_ms: row.get(10)?,
        input_tokens: row.get(11)?,
        output_tokens: row.get(12)?,
        created_at: row.get(13)?,
        finished_at: row.get(14)?,
        warnings: row
            .get::<Option<String>>(15)?
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default(),
        started_by: row.get(16)?,
    })
}

/// Erases what was written in the runs `roots` selects (trace ids, by the parameter `?1` =
/// `key`) and in every run they delegated to: prompts, responses, LLM texts, tool inputs,
/// outputs and errors. The traces keep their shape, timings and outcomes, as a viewer sees
/// them. Returns how many runs it touched.
pub fn erase_content(conn: &Conn, roots: &str, key: &str) -> Result<u64> {
    let runs = format!(
        "WITH RECURSIVE runs (id) AS ({roots} \
         UNION SELECT t.id FROM traces t JOIN runs r ON t.parent_trace_id = r.id)"
    );
    for erase in [
        "UPDATE llm_calls SET response_text = NULL WHERE trace_id IN (SELECT id FROM runs)",
        "UPDATE tool_invocations SET input = 'null', output = NULL, error_message = NULL \
         WHERE trace_id IN (SELECT id FROM runs)",
    ] {
        conn.execute(&format!("{runs} {erase}"), params![key])?;
    }
    conn.execute(
        &format!(
            "{runs} UPDATE traces SET prompt = '', response = NULL WHERE id IN (SELECT id FROM runs)"
        ),
        params![key],
    )
}

/// A page of traces, newest first.
pub fn list(conn: &Conn, limit: u32, offset: u32) -> Result<Vec<Trace>> {
    conn.query(
        &format!(
            "SELECT {COLUMNS} FROM traces ORDER BY created_at DESC, rowid DESC LIMIT ?1 OFFSET ?2"
        ),
        params![limit, offset],
        from_row,
    )
}

pub fn get(conn: &Conn, id: &str) -> Result<Option<Trace>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM traces WHERE id = ?1"),
        params![id],
        from_row,
    )
}

/// The LLM calls and tool invocations of a trace on one timeline.
pub fn steps(conn: &Conn, trace_id: &str) -> Result<Vec<Step>> {
    let mut steps = conn.query(
        "SELECT step, provider, model, status, error_message, response_text, input_tokens, \
         output_tokens, started_at, latency_ms FROM llm_calls WHERE trace_id = ?1",
        params![trace_id],
        |r| {
            Ok(Step::LlmCall {
                step: r.get(0)?,
                provider: r.get(1)?,
                model: r.get(2)?,
                status: r.get(3)?,
                error_message: r.get(4)?,
                response_text: r.get(5)?,
                input_tokens: r.get(6)?,
                output_tokens: r.get(7)?,
                started_at: r.get(8)?,
                latency_ms: r.get(9)?,
            })
        },
    )?;
    let invocations = conn.query(
        "SELECT step, call_id, tool_name, input, output, status, error_message, started_at, \
         latency_ms FROM tool_invocations WHERE trace_id = ?1",
        params![trace_id],
        |r| {
            let input: String = r.get(3)?;
            Ok(Step::ToolInvocation {
                step: r.get(0)?,
                call_id: r.get(1)?,
                tool_name: r.get(2)?,
                // Written by this module from a JSON value; fall back to the raw text if edited.
                input: serde_json::from_str(&input).unwrap_or(Value::String(input)),
                output: r.get(4)?,
                status: r.get(5)?,
                error_message: r.get(6)?,
                started_at: r.get(7)?,
                latency_ms: r.get(8)?,
            })
        },
    )?;
    steps.extend(invocations);
    steps.sort_by_key(Step::position);
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn records_a_run_with_its_steps_in_order() {
        each_conn(Backends::Both, |conn| {
            let id = start(
                conn,
                &NewTrace {
                    id: None,
                    source: "chat",
                    provider: "offline",
                    model: "offline-1",
                    prompt: "save a note",
                    ..NewTrace::default()
                },
            )
            .unwrap();
            assert_eq!(get(conn, &id).unwrap().unwrap().status, "running");
            let at = db::now();
            record_llm_call(
                conn,
                &id,
                &LlmCall {
                    step: 2,
                    provider: "offline",
                    model: "offline-1",
                    started_at: &at,
                    latency_ms: 3,
                    ..LlmCall::default()
                },
            )
            .unwrap();
            let input = serde_json::json!({"title": "x"});
            record_tool_invocation(
                conn,
                &id,
                &ToolInvocation {
                    step: 1,
                    tool_name: "create_note",
                    input: &input,
                    error: Some("disk full"),
                    started_at: &at,
                    latency_ms: 1,
                    ..ToolInvocation::default()
                },
            )
            .unwrap();
            record_llm_call(
                conn,
                &id,
                &LlmCall {
                    step: 0,
                    provider: "offline",
                    model: "offline-1",
                    started_at: &at,
                    latency_ms: 2,
                    ..LlmCall::default()
                },
            )
            .unwrap();
            finish(
                conn,
                &id,
                &Outcome {
                    error: Some("boom"),
                    latency_ms: 9,
                    ..Outcome::default()
                },
            )
            .unwrap();

            let trace = get(conn, &id).unwrap().unwrap();
            assert_eq!(
                (trace.status.as_str(), trace.error_message.as_deref()),
                ("error", Some("boom"))
            );
            let steps = steps(conn, &id).unwrap();
            let order: Vec<i64> = steps.iter().map(Step::position).collect();
            assert_eq!(order, [0, 1, 2]);
            assert!(
                matches!(&steps[1], Step::ToolInvocation { status, input: i, .. } if status == "error" && *i == input)
            );
            assert!(matches!(
                finish(conn, "nope", &Outcome::default()),
                Err(Error::NotFound(_))
            ));
        });
    }
}
