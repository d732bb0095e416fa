//! Native adapters run on one replica at a time: the scheduler ticks once, a gateway
//! connection is held once, a mailbox is polled once. Each native has a lease; the replica
//! holding it runs the adapter, the others stand by and take over within 12 s (the lease
//! and one round) once the holder stops renewing (it died, or lost the database). A holder that
//! cannot renew stops the adapter itself before its lease can pass to another, so two replicas
//! never run one native at once. A disabled native keeps its holder, which starts it when an
//! operator enables it on any replica. With SQLite there is one replica, which holds them all.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Supervisor;
use crate::db::Db;
use crate::leases;

/// How long a native's lease lasts without renewal.
const LEASE: Duration = Duration::from_secs(10);
/// How often leases are renewed, and how often a replica on standby tries to take one over.
const EVERY: Duration = Duration::from_secs(2);
/// A holder that could not renew for this long stops the adapter: its lease may be about to
/// pass to another replica.
const SELF_FENCE: Duration = Duration::from_secs(7);

fn lease_name(adapter: &str) -> String {
    format!("adapter:{adapter}")
}

/// What this replica knows of one native's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Renewed last at this instant.
    Since(Instant),
    No,
}

pub struct Singletons {
    supervisor: Arc<Supervisor>,
    db: Db,
    replica: String,
    held: HashMap<String, Held>,
}

impl Singletons {
    pub fn new(supervisor: Arc<Supervisor>, db: Db, replica: String) -> Self {
        Self {
            supervisor,
            db,
            replica,
            held: HashMap::new(),
        }
    }

    /// Takes the leases of the natives no other replica runs, and puts the others on
    /// standby; call before the natives start ([`Supervisor::start_natives`] then starts the
    /// ones held here).
    pub fn first_round(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for name in self.supervisor.natives() {
                match self.ask(&name).await {
                    Ok(Ok(())) => {
                        self.held.insert(name.clone(), Held::Since(Instant::now()));
                    }
                    Ok(Err(holder)) => self.stand_by(&name, holder).await,
                    Err(e) => {
                        tracing::warn!(adapter = name, "cannot learn which replica runs it: {e}");
                        self.supervisor
                            .stand_by(&name, "standby: finding out which replica runs it")
                            .await;
                    }
                }
            }
        })
    }

    /// Renews and takes over leases until `stop`, then gives up the ones held (call after the
    /// adapters stopped), so another replica takes over at once.
    pub fn keep(mut self, stop: CancellationToken) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(EVERY) => self.round().await,
                    () = stop.cancelled() => break,
                }
            }
            let (db, me) = (self.db.clone(), self.replica.clone());
            let held: Vec<String> = self
                .held
                .iter()
                .filter(|(_, held)| matches!(held, Held::Since(_)))
                .map(|(name, _)| lease_name(name))
                .collect();
            let _ = db
                .call(move |conn| {
                    for name in &held {
                        leases::release(conn, name, &me)?;
                    }
                    Ok(())
                })
                .await;
        })
    }

    async fn round(&mut self) {
        for name in self.supervisor.natives() {
            self.look_at(&name).await;
        }
    }

    /// Takes or renews `name`'s lease: `Err` with the holder (if any) when another has it.
    async fn ask(&self, name: &str) -> crate::error::Result<Result<(), Option<String>>> {
        let (lease, me) = (lease_name(name), self.replica.clone());
        self.db
            .call(
                move |conn| match leases::hold(conn, &lease, &me, LEASE.as_millis() as i64)? {
                    Some(_) => Ok(Ok(())),
                    None => Ok(Err(leases::holder(conn, &lease)?)),
                },
            )
            .await
    }

    async fn stand_by(&mut self, name: &str, holder: Option<String>) {
        self.held.insert(name.to_owned(), Held::No);
        let reason = match holder {
            Some(holder) => format!("standby: replica {holder} runs it"),
            None => "standby: another replica is taking it over".to_owned(),
        };
        self.supervisor.stand_by(name, &reason).await;
    }

    async fn look_at(&mut self, name: &str) {
        let was = self.held.get(name).copied().unwrap_or(Held::No);
        match self.ask(name).await {
            Ok(Ok(())) => {
                self.held
                    .insert(name.to_owned(), Held::Since(Instant::now()));
                if was == Held::No {
                    tracing::info!(adapter = name, "this replica runs it now");
                    self.supervisor.take_over(name).await;
                }
            }
            Ok(Err(holder)) => self.stand_by(name, holder).await,
            Err(e) => {
                if let Held::Since(at) = was
                    && at.elapsed() > SELF_FENCE
                {
                    tracing::warn!(adapter = name, "cannot renew its lease, stopping it: {e}");
                    self.held.insert(name.to_owned(), Held::No);
                    self.supervisor
                        .stand_by(
                            name,
                            "standby: the database cannot be reached to renew its lease",
                        )
                        .await;
                }
            }
        }
    }
}
