//! Acting on what other replicas changed (see `bus`): their jobs, cancellations, toggles,
//! components and keys. With SQLite the events come from this process only.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::adapters::Supervisor;
use crate::app::App;
use crate::bus::Event;
use crate::db::{Backend, Db};
use crate::settings_store::SettingsStore;
use crate::tasks::{self, RunningTasks};
use crate::wasm;

pub struct Peers {
    jobs_ready: Arc<Notify>,
    running: Arc<RunningTasks>,
    supervisor: Arc<Supervisor>,
    components: Arc<wasm::Components>,
    db: Db,
    env: Arc<SettingsStore>,
    data_dir: PathBuf,
    adapters_dir: PathBuf,
}

impl Peers {
    pub fn of(app: &App) -> Self {
        Self {
            jobs_ready: Arc::clone(&app.jobs_ready),
            running: Arc::clone(&app.running),
            supervisor: Arc::clone(&app.supervisor),
            components: Arc::clone(&app.components),
            db: app.db.clone(),
            env: Arc::clone(&app.env),
            data_dir: app.data_dir.clone(),
            adapters_dir: app.components.loader().adapters_dir().to_owned(),
        }
    }

    /// Acts on each event until `stop`.
    pub async fn follow(self, mut events: broadcast::Receiver<Event>, stop: CancellationToken) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = stop.cancelled() => return,
            };
            match event {
                Ok(Event::JobsReady) => self.jobs_ready.notify_one(),
                Ok(Event::TaskCancelled(task_id)) => drop(self.running.cancel(&task_id)),
                Ok(Event::AdapterToggled { name, enabled }) => {
                    self.supervisor.follow(&name, enabled).await;
                }
                Ok(Event::SettingsChanged) => self.reload_settings().await,
                Ok(Event::ComponentsChanged) => self.mirror_components().await,
                // Some events may be lost: everything they could have said is read again.
                Ok(Event::Resync) | Err(RecvError::Lagged(_)) => {
                    self.jobs_ready.notify_one();
                    self.stop_cancelled().await;
                    if let Err(e) = self.supervisor.reload_choices().await {
                        tracing::warn!("cannot re-read the adapter choices: {e}");
                    }
                    self.reload_settings().await;
                    self.mirror_components().await;
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// Stops the work here whose tasks were cancelled meanwhile, their notifications lost.
    async fn stop_cancelled(&self) {
        let running = self.running.keys();
        if running.is_empty() {
            return;
        }
        match self
            .db
            .call(move |conn| tasks::cancelled_among(conn, &running))
            .await
        {
            Ok(cancelled) => {
                for task_id in cancelled {
                    tracing::info!(task_id, "stopping a task cancelled on another replica");
                    self.running.cancel(&task_id);
                }
            }
            Err(e) => tracing::warn!("cannot re-read which running tasks were cancelled: {e}"),
        }
    }

    async fn reload_settings(&self) {
        let env = Arc::clone(&self.env);
        match self.db.call(move |conn| env.reload_shared(conn)).await {
            // The adapters that read a changed key take it.
            Ok(changed) => drop(self.components.settings_changed(&changed).await),
            Err(e) => tracing::warn!("cannot re-read the keys written on other replicas: {e}"),
        }
    }

    /// Writes the components installed into the shared database into the adapters folder,
    /// where the watcher loads them (PostgreSQL only: with SQLite, installs write the folder).
    pub async fn mirror_components(&self) {
        if self.db.backend() != Backend::Postgres {
            return;
        }
        match wasm::shared::mirror(&self.db, &self.data_dir, &self.adapters_dir).await {
            Ok(changed) if !changed.is_empty() => {
                tracing::info!(?changed, "mirrored components from the database");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot mirror the components of the database: {e:#}"),
        }
    }
}
