//! Who this process is among the replicas sharing a database, and the presence that tells the
//! others it is alive. Work a process records as its own (running tasks and runs) is failed
//! by the others once its presence runs out, and by itself when it restarts.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, Event};
use crate::db::{Backend, Conn, Db, SessionLock};
use crate::settings_store::SettingsStore;
use crate::{job_queue, leases, liveness, tasks, traces};

/// Names this replica instead of the id kept in the data directory.
pub const ID_VARIABLE: &str = "SERVICE_REPLICA_ID";

/// A presence not renewed for this long belongs to a replica that stopped.
const PRESENCE_TTL: Duration = Duration::from_secs(15);

/// How often a presence is renewed, and how often work of stopped replicas is looked for.
const PRESENCE_EVERY: Duration = Duration::from_secs(5);
/// How often a replica on PostgreSQL looks for replicas whose process ended.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long a replica holds its own lock before it takes another's work over.
const SETTLE: Duration = Duration::from_secs(5);

const ID_FILE: &str = "replica-id";

/// The server's id: `SERVICE_REPLICA_ID`, else the one kept in `<data_dir>/replica-id`
/// (made on first start from the host name), so a replica that restarts knows its own.
pub fn server_id(data_dir: &Path, env: &SettingsStore) -> anyhow::Result<String> {
    if let Some(id) = env.get(ID_VARIABLE) {
        return validate(&id).map(|()| id);
    }
    let path = data_dir.join(ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) => {
            let id = id.trim().to_owned();
            validate(&id)
                .with_context(|| format!("{} holds an invalid replica id", path.display()))?;
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = format!(
                "{}-{}",
                host_name(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            std::fs::write(&path, format!("{id}\n"))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(id)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// A one-off id for a command-line process that runs work (`run`, `schedule run`).
pub fn command_id() -> String {
    format!("cli-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

fn validate(id: &str) -> anyhow::Result<()> {
    if id.is_empty()
        || id.len() > 64
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        bail!(
            "a replica id is 1 to 64 letters, digits, '-', '_' or '.'; got {id:?} \
             (set {ID_VARIABLE} or delete the replica-id file)"
        );
    }
    Ok(())
}

fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    if name.is_empty() {
        "replica".to_owned()
    } else {
        name
    }
}

/// The lease that says `id` is alive.
pub fn presence_lease(id: &str) -> String {
    format!("replica:{id}")
}

/// After a restart, before this replica takes any work: what it was running before is failed
/// (tasks and runs) or goes back to the queue (jobs, up to `job_attempts` starts).
pub async fn recover(db: &Db, id: &str, job_attempts: u32) -> crate::error::Result<()> {
    let me = id.to_owned();
    let (jobs, tasks, runs) = db
        .call(move |conn| {
            let jobs = job_queue::reclaim(conn, job_attempts, Some(&me))?;
            let tasks = tasks::fail_orphaned(conn, Some(&me))?;
            let runs = traces::fail_orphaned(conn, Some(&me))?;
            Ok((jobs, tasks, runs))
        })
        .await?;
    if jobs.0 + jobs.1 + tasks + runs > 0 {
        tracing::info!(
            requeued_jobs = jobs.0,
            failed_jobs = jobs.1,
            tasks,
            runs,
            "recovered the work left by this replica's previous process"
        );
    }
    Ok(())
}

/// What the server does besides keeping its presence: take over the work of replicas whose
/// process ended, and wake the job workers for what it requeued.
pub struct Watch {
    pub bus: Arc<Bus>,
    pub job_attempts: u32,
}

/// Announces this process's presence now and keeps it until `stop`; meanwhile, every few
/// seconds, fails the running tasks and runs of replicas whose presence ran out. Command-line
/// processes that run work hold one too, so the server never fails their runs.
///
/// On PostgreSQL it also holds its replica's advisory lock (see [`liveness`]) on a connection
/// of its own, taken again when that connection is lost; with `watch`, every second it takes
/// over the work of replicas whose lock is free (their process ended), so their jobs run again
/// within seconds rather than once their leases run out. It waits [`SETTLE`] after taking its
/// own lock before it does: when the database restarts, every replica loses its lock at once
/// and needs a moment to take it back.
pub async fn keep_presence(
    db: Db,
    id: String,
    stop: CancellationToken,
    watch: Option<Watch>,
) -> crate::error::Result<tokio::task::JoinHandle<()>> {
    let postgres = db.backend() == Backend::Postgres;
    let mut lock = db.session_lock(liveness::key(&id)).await?;
    let mut locked_at = Instant::now();
    let me = id.clone();
    db.call(move |conn| hold_presence(conn, &me)).await?;
    Ok(tokio::spawn(async move {
        let start = tokio::time::Instant::now() + PRESENCE_EVERY;
        let mut presence = tokio::time::interval_at(start, PRESENCE_EVERY);
        let mut watching = tokio::time::interval(WATCH_EVERY);
        watching.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = presence.tick() => renew_presence(&db, &id).await,
                _ = watching.tick(), if postgres => {
                    if lock.is_none() {
                        match db.session_lock(liveness::key(&id)).await {
                            Ok(taken) => (lock, locked_at) = (taken, Instant::now()),
                            Err(e) => tracing::warn!("cannot take this replica's lock again: {e}"),
                        }
                    } else if let Some(watch) = &watch
                        && locked_at.elapsed() >= SETTLE
                    {
                        take_over(&db, &id, watch).await;
                    }
                }
                () = lost(&mut lock) => {
                    tracing::warn!("this replica's lock connection was lost; taking it again");
                    lock = None;
                }
                () = stop.cancelled() => break,
            }
        }
        let me = id.clone();
        let _ = db
            .call(move |conn| leases::release(conn, &presence_lease(&me), &me))
            .await;
    }))
}

/// [`keep_presence`] for a command-line process that runs work: until it shuts down, watching
/// no other replica.
pub async fn keep_command_presence(
    app: &crate::app::App,
) -> crate::error::Result<tokio::task::JoinHandle<()>> {
    keep_presence(
        app.db.clone(),
        app.replica.clone(),
        app.shutdown.clone(),
        None,
    )
    .await
}

async fn renew_presence(db: &Db, id: &str) {
    let me = id.to_owned();
    let swept = db
        .call(move |conn| {
            hold_presence(conn, &me)?;
            Ok(tasks::fail_orphaned(conn, None)? + traces::fail_orphaned(conn, None)?)
        })
        .await;
    match swept {
        Ok(0) => {}
        Ok(failed) => tracing::info!(failed, "failed the work of replicas that stopped"),
        Err(e) => tracing::warn!("cannot renew this replica's presence: {e}"),
    }
}

/// Resolves when the held lock's connection is lost; never without a lock.
async fn lost(lock: &mut Option<SessionLock>) {
    match lock {
        Some(lock) => lock.lost().await,
        None => std::future::pending().await,
    }
}

async fn take_over(db: &Db, id: &str, watch: &Watch) {
    let (me, attempts) = (id.to_owned(), watch.job_attempts);
    match db
        .call(move |conn| liveness::take_over_dead(conn, &me, attempts))
        .await
    {
        Ok(dead) if dead.is_empty() => {}
        Ok(dead) => {
            tracing::info!(?dead, "took over the work of replicas whose process ended");
            watch.bus.publish(Event::JobsReady);
        }
        Err(e) => tracing::warn!("cannot look for replicas that ended: {e}"),
    }
}

fn hold_presence(conn: &Conn, id: &str) -> crate::error::Result<()> {
    leases::hold(
        conn,
        &presence_lease(id),
        id,
        PRESENCE_TTL.as_millis() as i64,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let env = SettingsStore::load(dir.path()).unwrap();
        let first = server_id(dir.path(), &env).unwrap();
        assert_eq!(server_id(dir.path(), &env).unwrap(), first, "kept");
        assert!(validate(&first).is_ok());
        std::fs::write(dir.path().join(ID_FILE), "bad id\n").unwrap();
        let err = format!("{:#}", server_id(dir.path(), &env).unwrap_err());
        assert!(err.contains("invalid replica id"), "{err}");
        assert!(validate(&command_id()).is_ok());
    }
}
