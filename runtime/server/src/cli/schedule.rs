//! `service-runtime schedule ...`: the only way to manage schedules. Works while the server
//! runs (SQLite WAL); the server sees changes at its next tick. Nothing is written when the
//! input is invalid.

use std::path::Path;

use crate::agents::profiles;
use crate::app::{self, App, Role};
use crate::config::FileConfig;
use crate::db::Db;
use crate::replica;
use crate::scheduler;
use crate::scheduler::cron;
use crate::scheduler::manage::{self, Changes, Draft};
use crate::scheduler::plan;
use crate::scheduler::store::{self, Schedule};
use crate::scheduler::tick::Due;
use crate::settings_store::SettingsStore;
use crate::tasks;
use chrono::Utc;
use chrono_tz::Tz;
use clap::Subcommand;
use service_contract::agent::RunFailureKind;

use super::through;
use crate::running_server::Running;

#[derive(Subcommand)]
pub(super) enum ScheduleCommand {
    /// Create a schedule
    Create {
        name: String,
        /// 5-field cron, an @alias (@hourly, @daily, ...) or every 1m / 5m / 30m / 1h
        #[arg(long)]
        cron: String,
        /// Agent profile that runs
        #[arg(long)]
        agent: String,
        /// Instruction sent on every run
        #[arg(long)]
        prompt: String,
        /// What to do about runs missed while the server was down: coalesce, all or skip
        #[arg(long, default_value = "coalesce")]
        catch_up: String,
        /// Create it disabled
        #[arg(long)]
        disabled: bool,
    },
    /// List schedules
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule
    Show { name: String },
    /// Change a schedule (a new cron recomputes the next run)
    Edit {
        name: String,
        #[arg(long)]
        cron: Option<String>,
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        prompt: Option<String>,
        #[arg(long)]
        catch_up: Option<String>,
    },
    /// Let the scheduler consider it again (from the next slot on)
    Enable { name: String },
    /// Keep the scheduler from running it
    Disable { name: String },
    /// Delete a schedule
    Delete { name: String },
    /// Run it once now, outside the cron (its next run is unchanged)
    Run { name: String },
}

async fn open(data_dir: &Path) -> anyhow::Result<(Db, Tz)> {
    let env = SettingsStore::load(data_dir)?;
    let config = FileConfig::load(data_dir)?;
    let db = app::open_db(data_dir, &env, &config).await?;
    let tz = cron::zone(env.get("SERVICE_TZ").as_deref()).map_err(anyhow::Error::msg)?;
    Ok((db, tz))
}

/// A missing profile is allowed (it may be created later) but worth saying.
fn warn_unknown_profile(db: &Db, agent: &str) -> anyhow::Result<()> {
    if db.blocking(|conn| profiles::get(conn, agent))?.is_none() {
        eprintln!(
            "warning: there is no agent profile named {agent:?} yet; runs fail until it exists"
        );
    }
    Ok(())
}

fn next_run_text(schedule: &Schedule) -> String {
    match (
        schedule.enabled,
        schedule
            .next_run_at
            .as_deref()
            .and_then(store::parse_timestamp),
    ) {
        (false, _) => "disabled".to_owned(),
        (true, Some(next)) => format!(
            "{} ({})",
            store::timestamp(next),
            plan::describe_next(next, Utc::now())
        ),
        (true, None) => "at the next tick".to_owned(),
    }
}

fn print_details(schedule: &Schedule) -> anyhow::Result<()> {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    outln!("name:            {}", schedule.name)?;
    outln!("cron:            {}", schedule.cron_expression)?;
    outln!("agent:           {}", schedule.agent_profile_name)?;
    outln!("prompt:          {}", schedule.prompt)?;
    outln!("enabled:         {}", schedule.enabled)?;
    outln!("catch-up:        {}", schedule.catch_up_policy)?;
    outln!("next run:        {}", next_run_text(schedule))?;
    outln!("last run:        {}", dash(&schedule.last_run_at))?;
    outln!("last trace:      {}", dash(&schedule.last_trace_id))
}

pub(super) async fn run(data_dir: &Path, command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Create {
            name,
            cron,
            agent,
            prompt,
            catch_up,
            disabled,
        } => {
            let draft = Draft {
                name: &name,
                cron: &cron,
                agent: &agent,
                prompt: &prompt,
                catch_up: Some(&catch_up),
                enabled: !disabled,
            };
            // Checked before anything is opened: a typo needs no database.
            cron::parse(draft.cron).map_err(anyhow::Error::msg)?;
            let (db, tz) = open(data_dir).await?;
            warn_unknown_profile(&db, &agent)?;
            let schedule = db.blocking(|conn| manage::create(conn, &draft, &tz, Utc::now()))?;
            outln!(
                "created schedule {:?} ({}); next run: {}",
                schedule.name,
                schedule.cron_expression,
                next_run_text(&schedule)
            )?;
        }
        ScheduleCommand::List { json } => {
            let (db, _) = open(data_dir).await?;
            let schedules = db.blocking(|conn| store::list(conn))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&schedules)?)?;
            } else if schedules.is_empty() {
                outln!("no schedules; create one with `service-runtime schedule create`")?;
            } else {
                outln!(
                    "{:<20} {:<16} {:<14} {:<9} NEXT RUN",
                    "NAME",
                    "CRON",
                    "AGENT",
                    "CATCH-UP"
                )?;
                for s in &schedules {
                    outln!(
                        "{:<20} {:<16} {:<14} {:<9} {}",
                        s.name,
                        s.cron_expression,
                        s.agent_profile_name,
                        s.catch_up_policy,
                        next_run_text(s)
                    )?;
                }
            }
        }
        ScheduleCommand::Show { name } => {
            let (db, _) = open(data_dir).await?;
            print_details(&db.blocking(|conn| store::require(conn, &name))?)?;
        }
        ScheduleCommand::Edit {
            name,
            cron,
            agent,
            prompt,
            catch_up,
        } => {
            let changes = Changes {
                cron: cron.as_deref(),
                agent: agent.as_deref(),
                prompt: prompt.as_deref(),
                catch_up: catch_up.as_deref(),
            };
            if changes.is_empty() {
                anyhow::bail!("nothing to change: give --cron, --agent, --prompt or --catch-up");
            }
            let (db, tz) = open(data_dir).await?;
            if let Some(agent) = &agent {
                warn_unknown_profile(&db, agent)?;
            }
            let schedule =
                db.blocking(|conn| manage::edit(conn, &name, &changes, &tz, Utc::now()))?;
            print_details(&schedule)?;
        }
        ScheduleCommand::Enable { name } => {
            let (db, tz) = open(data_dir).await?;
            let schedule =
                db.blocking(|conn| manage::set_enabled(conn, &name, true, &tz, Utc::now()))?;
            outln!(
                "enabled {:?}; next run: {}",
                schedule.name,
                next_run_text(&schedule)
            )?;
        }
        ScheduleCommand::Disable { name } => {
            let (db, tz) = open(data_dir).await?;
            db.blocking(|conn| manage::set_enabled(conn, &name, false, &tz, Utc::now()))?;
            outln!("disabled {name:?}")?;
        }
        ScheduleCommand::Delete { name } => {
            let (db, _) = open(data_dir).await?;
            db.blocking(|conn| store::delete(conn, &name))?;
            outln!("deleted {name:?}")?;
        }
        ScheduleCommand::Run { name } => {
            if let Some(server) = through::server(data_dir).await? {
                return run_on_server(&server, &name).await;
            }
            let app = App::open(data_dir, Role::Command).await?;
            let (schedule, mut in_progress) = app.db.blocking(|conn| {
                Ok((
                    store::require(conn, &name)?,
                    scheduler::runs_in_progress(conn)?,
                ))
            })?;
            // The run's task names this process, which says it is alive while it runs.
            let _presence = replica::keep_command_presence(&app).await?;
            if let Some(task) = in_progress.remove(&name) {
                anyhow::bail!(
                    "a run of {name:?} is still in progress (task {task}); a schedule never overlaps itself"
                );
            }
            let due = Due {
                name: schedule.name,
                agent: schedule.agent_profile_name,
                prompt: schedule.prompt,
            };
            app.dispatcher.stamp_run_now(&due.name).await?;
            let ran = tokio::select! {
                ran = app.dispatcher.run(due) => ran?,
                _ = tokio::signal::ctrl_c() => {
                    // The run ends with this process; its task says so rather than holding
                    // the schedule back as a run in progress.
                    app.db.blocking(|conn| {
                        match scheduler::runs_in_progress(conn)?.remove(&name) {
                            Some(task) => tasks::cancel_or_delete(conn, &task).map(drop),
                            None => Ok(()),
                        }
                    })?;
                    anyhow::bail!("interrupted: the run of {name:?} was cancelled");
                }
            };
            let trace = ran.trace_id().unwrap_or("-").to_owned();
            let outcome = ran
                .outcome
                .map(|reply| reply.text)
                .map_err(|f| (f.kind == RunFailureKind::UnknownAgent, f.to_string()));
            report(&name, &ran.status.to_string(), outcome, &trace)?;
        }
    }
    Ok(())
}

/// What a run now ended with: the answer, then the trace id last, as `run` prints them; or
/// the error (`true` when its agent is unknown).
fn report(
    name: &str,
    status: &str,
    outcome: Result<String, (bool, String)>,
    trace: &str,
) -> anyhow::Result<()> {
    match outcome {
        Ok(text) => {
            outln!("{text}\ntrace_id: {trace}")?;
            Ok(())
        }
        Err((true, failure)) => anyhow::bail!(
            "the run of {name:?} failed: {failure}; create that agent or point the schedule at \
             another with `schedule edit {name} --agent NAME` (trace_id: {trace})"
        ),
        Err((false, failure)) => anyhow::bail!(
            "the run of {name:?} ended with status {status}: {failure} (trace_id: {trace})"
        ),
    }
}

/// `schedule run` on the server (`POST /api/schedules/{name}/run?wait=true`).
async fn run_on_server(server: &Running, name: &str) -> anyhow::Result<()> {
    let mut url = reqwest::Url::parse(&server.url)?;
    url.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("the server URL cannot take a path"))?
        .extend(["api", "schedules", name, "run"]);
    url.set_query(Some("wait=true"));
    let response = server.client().post(url).send().await?;
    if !response.status().is_success() {
        return Err(through::refused(response).await);
    }
    let ran: serde_json::Value = response.json().await?;
    let outcome = match ran["text"].as_str() {
        Some(text) => Ok(text.to_owned()),
        None => Err((
            ran["unknown_agent"] == true,
            ran["error"].as_str().unwrap_or("the run failed").to_owned(),
        )),
    };
    let status = ran["status"].as_str().unwrap_or("-");
    report(
        name,
        status,
        outcome,
        ran["trace_id"].as_str().unwrap_or("-"),
    )
}
