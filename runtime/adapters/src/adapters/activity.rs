//! Adapters' last activity, kept across restarts (`adapter_activity`): saved every few seconds
//! and at shutdown, restored onto each entry as it is registered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use service_contract::AdapterRegistry;
use tokio_util::sync::CancellationToken;

use crate::db::Db;
use crate::error::Result;
use crate::params;

/// How often new activity is written.
const SAVE_EVERY: Duration = Duration::from_secs(5);

/// The last activity of every adapter that had one, by name.
pub async fn load(db: &Db) -> Result<HashMap<String, String>> {
    db.call(|conn| {
        conn.query(
            "SELECT name, last_activity_at FROM adapter_activity",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    })
    .await
    .map(|rows: Vec<(String, String)>| rows.into_iter().collect())
}

/// Writes new activity every [`SAVE_EVERY`] until `stop`, then once more.
pub fn keep(
    db: Db,
    registry: Arc<AdapterRegistry>,
    stop: CancellationToken,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let mut saved: HashMap<String, String> = HashMap::new();
        loop {
            let stopping = tokio::select! {
                () = tokio::time::sleep(SAVE_EVERY) => false,
                () = stop.cancelled() => true,
            };
            let fresh: Vec<(String, String)> = registry
                .entries()
                .into_iter()
                .filter_map(|e| Some((e.name, e.last_activity_at?)))
                .filter(|(name, at)| saved.get(name) != Some(at))
                .collect();
            if !fresh.is_empty() {
                let rows = fresh.clone();
                match db.call(move |conn| save(conn, &rows)).await {
                    Ok(()) => saved.extend(fresh),
                    Err(e) => tracing::warn!("cannot save the adapters' activity: {e}"),
                }
            }
            if stopping {
                return;
            }
        }
    })
}

/// Upserts, keeping the later time (another replica may have written one).
fn save(conn: &crate::db::Conn, rows: &[(String, String)]) -> Result<()> {
    for (name, at) in rows {
        conn.execute(
            "INSERT INTO adapter_activity (name, last_activity_at) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET last_activity_at = excluded.last_activity_at \
             WHERE excluded.last_activity_at > adapter_activity.last_activity_at",
            params![name, at],
        )?;
    }
    Ok(())
}
