//! Wake-ups between replicas: what one replica changed that the others act on at once (a job
//! to take, a task to cancel, an operator's toggle, components or secrets written to the
//! database). Delivered in this process at once, and to the other replicas through
//! PostgreSQL's `LISTEN`/`NOTIFY`; with SQLite there are no others. A notification carries
//! no state, only what to re-read, so one that is lost costs a delay, never data: after its
//! listening connection was lost, a replica re-reads everything (`Resync`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::db::{Backend, Db};
use crate::params;

const CHANNEL: &str = "service_events";

/// How long a coalesced event waits for others like it before the other replicas hear of it.
pub(crate) const COALESCE: Duration = Duration::from_millis(100);

/// Events queued per subscriber before the slowest one misses some (it then resyncs).
const BACKLOG: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A job was enqueued: whichever replica has room takes it.
    JobsReady,
    /// A task was cancelled: the replica running it stops.
    TaskCancelled(String),
    /// An operator enabled or disabled an adapter.
    AdapterToggled { name: String, enabled: bool },
    /// Components were installed into or removed from the database.
    ComponentsChanged,
    /// Secrets were written through the API.
    SettingsChanged,
    /// Notifications may have been missed: re-read what they would have said.
    Resync,
}

impl Event {
    fn encode(&self) -> String {
        match self {
            Self::JobsReady => "jobs".to_owned(),
            Self::TaskCancelled(id) => format!("cancel\t{id}"),
            Self::AdapterToggled { name, enabled } => format!("toggle\t{name}\t{enabled}"),
            Self::ComponentsChanged => "components".to_owned(),
            Self::SettingsChanged => "settings".to_owned(),
            Self::Resync => "resync".to_owned(),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split('\t');
        Some(match (parts.next()?, parts.next(), parts.next()) {
            ("jobs", None, None) => Self::JobsReady,
            ("cancel", Some(id), None) => Self::TaskCancelled(id.to_owned()),
            ("toggle", Some(name), Some(enabled)) => Self::AdapterToggled {
                name: name.to_owned(),
                enabled: enabled.parse().ok()?,
            },
            ("components", None, None) => Self::ComponentsChanged,
            ("settings", None, None) => Self::SettingsChanged,
            ("resync", None, None) => Self::Resync,
            _ => return None,
        })
    }
}

pub struct Bus {
    local: broadcast::Sender<Event>,
    /// A coalesced notification is on its way.
    coalescing: AtomicBool,
    db: Db,
    /// This replica, so it skips its own notifications (it heard them at once).
    origin: String,
}

impl Bus {
    pub fn new(db: Db, origin: String) -> Arc<Self> {
        Arc::new(Self {
            local: broadcast::channel(BACKLOG).0,
            coalescing: AtomicBool::new(false),
            db,
            origin,
        })
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.local.subscribe()
    }

    /// Tells this process now and the other replicas shortly, without waiting for them.
    pub fn publish(&self, event: Event) {
        let _ = self.local.send(event.clone());
        self.tell_others(event);
    }

    /// Tells the other replicas only, for what this process has done itself already (an
    /// interrupted turn it stopped, an operator's toggle): hearing it back later would undo
    /// what came next (stop the next turn, disable what was enabled since).
    pub fn tell_others(&self, event: Event) {
        if self.db.backend() != Backend::Postgres {
            return;
        }
        let notice = self.notice(&event);
        tokio::spawn(async move {
            if let Err(e) = notice.await {
                tracing::warn!("cannot tell the other replicas of {event:?}: {e}");
            }
        });
    }

    /// Tells this process now and the other replicas within [`COALESCE`], in one notification
    /// for however many happen meanwhile: for frequent events (a job per chat message) whose
    /// every copy says the same. A notification per job measurably slowed every replica's
    /// acks: PostgreSQL serializes the commits that notify, and each wakes every replica.
    pub fn publish_coalesced(self: &Arc<Self>, event: Event) {
        let _ = self.local.send(event.clone());
        if self.db.backend() != Backend::Postgres || self.coalescing.swap(true, Ordering::AcqRel) {
            return;
        }
        let bus = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(COALESCE).await;
            bus.coalescing.store(false, Ordering::Release);
            if let Err(e) = bus.notice(&event).await {
                tracing::warn!("cannot tell the other replicas of {event:?}: {e}");
            }
        });
    }

    /// Tells the other replicas and waits until the database took the notification (a
    /// command that exits right after, say).
    pub async fn publish_and_wait(&self, event: Event) -> crate::error::Result<()> {
        let _ = self.local.send(event.clone());
        if self.db.backend() != Backend::Postgres {
            return Ok(());
        }
        self.notice(&event).await
    }

    fn notice(
        &self,
        event: &Event,
    ) -> impl Future<Output = crate::error::Result<()>> + Send + 'static {
        let db = self.db.clone();
        let payload = format!("{}\t{}", self.origin, event.encode());
        async move {
            db.call(move |conn| {
                conn.query_one(
                    "SELECT 1 FROM (SELECT pg_notify(?1, ?2)) sent",
                    params![CHANNEL, payload],
                    |_| Ok(()),
                )
            })
            .await
        }
    }

    /// Passes the other replicas' events on to this process's subscribers until `stop`,
    /// reconnecting with backoff when the listening connection is lost. Returns at once with
    /// SQLite.
    pub fn listen(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut backoff = Duration::from_millis(250);
            let mut reconnecting = false;
            loop {
                let listening = tokio::select! {
                    listening = self.db.listen(CHANNEL) => listening,
                    () = stop.cancelled() => return,
                };
                match listening {
                    Ok(None) => return,
                    Ok(Some(mut notes)) => {
                        backoff = Duration::from_millis(250);
                        if reconnecting {
                            tracing::info!("listening to the other replicas again");
                            let _ = self.local.send(Event::Resync);
                        }
                        loop {
                            let note = tokio::select! {
                                note = notes.recv() => note,
                                () = stop.cancelled() => return,
                            };
                            let Some(note) = note else { break };
                            if let Some(event) = self.heard(&note) {
                                let _ = self.local.send(event);
                            }
                        }
                        tracing::warn!("lost the connection that hears the other replicas");
                    }
                    Err(e) => tracing::warn!("cannot listen to the other replicas: {e}"),
                }
                reconnecting = true;
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = stop.cancelled() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        })
    }

    /// The event in another replica's notification.
    fn heard(&self, note: &str) -> Option<Event> {
        let (origin, event) = note.split_once('\t')?;
        if origin == self.origin {
            return None;
        }
        Event::decode(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{self, Backends};

    #[test]
    fn events_read_back_as_written() {
        for event in [
            Event::JobsReady,
            Event::TaskCancelled("t-1".into()),
            Event::AdapterToggled {
                name: "email".into(),
                enabled: false,
            },
            Event::ComponentsChanged,
            Event::SettingsChanged,
            Event::Resync,
        ] {
            assert_eq!(Event::decode(&event.encode()), Some(event));
        }
        assert_eq!(Event::decode("toggle\temail\tmaybe"), None);
    }

    #[test]
    fn another_replica_hears_what_one_publishes_and_nobody_hears_itself() {
        testing::each_backend(Backends::PostgresOnly, |db| {
            testing::block_on(async {
                let (a, b) = (
                    Bus::new(db.clone(), "a".into()),
                    Bus::new(db.clone(), "b".into()),
                );
                let stop = CancellationToken::new();
                let mut heard_by_b = b.subscribe();
                let mut heard_by_a = a.subscribe();
                tokio::spawn(Arc::clone(&b).listen(stop.clone()));
                tokio::spawn(Arc::clone(&a).listen(stop.clone()));
                // Published until b listens: its connection comes up in the background.
                let mut published = 0;
                let heard = tokio::time::timeout(Duration::from_secs(10), async {
                    loop {
                        a.publish(Event::TaskCancelled("t-9".into()));
                        published += 1;
                        tokio::select! {
                            event = heard_by_b.recv() => return event.unwrap(),
                            () = tokio::time::sleep(Duration::from_millis(100)) => {}
                        }
                    }
                })
                .await
                .unwrap();
                assert_eq!(heard, Event::TaskCancelled("t-9".into()));
                // a heard each of its own once, at once, and never again through the database.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let mut own = 0;
                while heard_by_a.try_recv().is_ok() {
                    own += 1;
                }
                assert_eq!(own, published);
                stop.cancel();
            });
        });
    }
}
