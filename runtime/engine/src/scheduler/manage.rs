//! Changing schedules, as the CLI and the API both do: the cron and catch-up policy parsed
//! (a bad one is an error naming its field), the next run computed in the server's zone from
//! now, and enabling one starting from its next slot (a backlog from while it was off is not
//! replayed).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cron::{self, CronExpr};
use super::plan::{self, CatchUp};
use super::store::{self, Edit, NewSchedule, Schedule};
use crate::db::Conn;
use crate::error::{Error, Result};

/// A schedule to create.
pub struct Draft<'a> {
    pub name: &'a str,
    pub cron: &'a str,
    pub agent: &'a str,
    pub prompt: &'a str,
    /// `coalesce` when `None`.
    pub catch_up: Option<&'a str>,
    pub enabled: bool,
}

/// What to change of a schedule; `None` keeps a field.
#[derive(Default)]
pub struct Changes<'a> {
    pub cron: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub prompt: Option<&'a str>,
    pub catch_up: Option<&'a str>,
}

impl Changes<'_> {
    pub fn is_empty(&self) -> bool {
        self.cron.is_none()
            && self.agent.is_none()
            && self.prompt.is_none()
            && self.catch_up.is_none()
    }
}

fn cron(text: &str) -> Result<CronExpr> {
    cron::parse(text).map_err(|e| Error::field("cron", e))
}

fn catch_up(text: &str) -> Result<CatchUp> {
    text.parse()
        .map_err(|e: String| Error::field("catch_up", e))
}

pub fn create(conn: &Conn, draft: &Draft<'_>, tz: &Tz, now: DateTime<Utc>) -> Result<Schedule> {
    let cron = cron(draft.cron)?;
    let catch_up = catch_up(draft.catch_up.unwrap_or("coalesce"))?;
    store::create(
        conn,
        &NewSchedule {
            name: draft.name,
            cron: &cron,
            agent: draft.agent,
            prompt: draft.prompt,
            catch_up,
            enabled: draft.enabled,
            next_run_at: plan::first_run(&cron, now, tz),
        },
    )
}

pub fn edit(
    conn: &mut Conn,
    name: &str,
    changes: &Changes<'_>,
    tz: &Tz,
    now: DateTime<Utc>,
) -> Result<Schedule> {
    if changes.is_empty() {
        return Err(Error::invalid(
            "nothing to change: give cron, agent, prompt or catch_up",
        ));
    }
    let cron = changes.cron.map(cron).transpose()?;
    let catch_up = changes.catch_up.map(catch_up).transpose()?;
    let edit = Edit {
        cron: cron.as_ref().map(|c| (c, plan::first_run(c, now, tz))),
        agent: changes.agent,
        prompt: changes.prompt,
        catch_up,
    };
    store::edit(conn, name, &edit)
}

/// Enables a schedule from its next slot after `now`, or disables it.
pub fn set_enabled(
    conn: &Conn,
    name: &str,
    enabled: bool,
    tz: &Tz,
    now: DateTime<Utc>,
) -> Result<Schedule> {
    if !enabled {
        return store::set_enabled(conn, name, false, None);
    }
    let current = store::require(conn, name)?;
    let cron = cron::parse(&current.cron_expression).map_err(Error::invalid)?;
    store::set_enabled(conn, name, true, plan::first_run(&cron, now, tz))
}
