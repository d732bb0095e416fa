//! Shadow builds' comparisons (see the adapters' `shadow`): per adapter, the build being
//! compared, its counts, and its latest differences. Every replica running the shadow adds to
//! the same counts; a new build starts them anew.

use serde::Serialize;

use crate::db::{self, Conn};
use crate::error::Result;
use crate::params;

/// Differences kept per adapter, the newest.
pub const DIFFERENCES_KEPT: u32 = 20;

/// A shadow build's comparisons so far.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Shadow {
    pub adapter: String,
    /// The shadow build's version and digest.
    pub version: String,
    pub sha256: String,
    /// When this build's comparisons began (RFC 3339).
    pub since: String,
    /// Live calls it was run on.
    pub compared: i64,
    /// Those it answered as the live build did (same output, same outcome).
    pub matched: i64,
    /// Live calls in its sample it was not run on: all its instances were busy.
    pub skipped: i64,
    /// The latest calls it answered otherwise, newest first (at most 20).
    pub differences: Vec<Difference>,
}

/// One live call the shadow answered otherwise.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Difference {
    pub id: String,
    /// When it was compared (RFC 3339).
    pub at: String,
    /// `handle-http`, `run-job`, `call-tool`, `start` or `stop`.
    pub export: String,
    /// The live call's input, as its recording keeps it.
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// `{outcome, output}` of the live build.
    #[schema(value_type = Object)]
    pub live: serde_json::Value,
    /// `{outcome, output, error}` of the shadow.
    #[schema(value_type = Object)]
    pub shadow: serde_json::Value,
    /// Imports the shadow made that the live call did not: refused, nothing done.
    #[schema(value_type = Vec<Object>)]
    pub refused: serde_json::Value,
}

/// Starts comparing build `sha256` of `adapter`'s shadow; the counts of an earlier build go.
/// Another replica starting the same build keeps them.
pub fn begin(conn: &mut Conn, adapter: &str, version: &str, sha256: &str) -> Result<()> {
    conn.transaction(|conn| {
        conn.execute(
            "INSERT INTO adapter_shadows (adapter, version, sha256, since) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (adapter) DO UPDATE SET version = excluded.version, \
             sha256 = excluded.sha256, since = excluded.since, compared = 0, matched = 0, \
             skipped = 0 WHERE adapter_shadows.sha256 <> excluded.sha256",
            params![adapter, version, sha256, db::now()],
        )?;
        conn.execute(
            "DELETE FROM adapter_shadow_differences WHERE adapter = ?1 AND sha256 <> ?2",
            params![adapter, sha256],
        )?;
        Ok(())
    })
}

/// Comparisons counted since the last write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub compared: u64,
    pub matched: u64,
    pub skipped: u64,
}

/// Adds comparisons of build `sha256` and their differences (oldest first, each
/// `{export, input, live, shadow, refused}` as JSON text). Nothing is counted once that build
/// no longer shadows.
pub fn compared(
    conn: &mut Conn,
    adapter: &str,
    sha256: &str,
    counts: Counts,
    differences: &[String],
) -> Result<()> {
    conn.transaction(|conn| {
        let counted = conn.execute(
            "UPDATE adapter_shadows SET compared = compared + ?3, matched = matched + ?4, \
             skipped = skipped + ?5 WHERE adapter = ?1 AND sha256 = ?2",
            params![
                adapter,
                sha256,
                counts.compared as i64,
                counts.matched as i64,
                counts.skipped as i64
            ],
        )?;
        if counted == 0 || differences.is_empty() {
            return Ok(());
        }
        // Ordered by when they were compared: one millisecond apart within a write.
        let now = db::now_ms() - differences.len() as i64;
        for (n, body) in differences.iter().enumerate() {
            let at_ms = now + n as i64 + 1;
            let at = chrono::DateTime::from_timestamp_millis(at_ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            conn.execute(
                "INSERT INTO adapter_shadow_differences (id, adapter, sha256, at, at_ms, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    uuid::Uuid::new_v4().to_string(),
                    adapter,
                    sha256,
                    at,
                    at_ms,
                    body
                ],
            )?;
        }
        conn.execute(
            "DELETE FROM adapter_shadow_differences WHERE adapter = ?1 AND (at_ms, id) <= \
             (SELECT at_ms, id FROM adapter_shadow_differences WHERE adapter = ?1 \
              ORDER BY at_ms DESC, id DESC LIMIT 1 OFFSET ?2)",
            params![adapter, i64::from(DIFFERENCES_KEPT)],
        )?;
        Ok(())
    })
}

/// `adapter`'s shadow build and its comparisons, when it has one.
pub fn get(conn: &Conn, adapter: &str) -> Result<Option<Shadow>> {
    let Some(mut shadow) = conn.query_opt(
        "SELECT adapter, version, sha256, since, compared, matched, skipped \
         FROM adapter_shadows WHERE adapter = ?1",
        params![adapter],
        |r| {
            Ok(Shadow {
                adapter: r.get(0)?,
                version: r.get(1)?,
                sha256: r.get(2)?,
                since: r.get(3)?,
                compared: r.get(4)?,
                matched: r.get(5)?,
                skipped: r.get(6)?,
                differences: Vec::new(),
            })
        },
    )?
    else {
        return Ok(None);
    };
    shadow.differences = conn.query(
        "SELECT id, at, body FROM adapter_shadow_differences WHERE adapter = ?1 AND sha256 = ?2 \
         ORDER BY at_ms DESC, id DESC LIMIT ?3",
        params![adapter, shadow.sha256, DIFFERENCES_KEPT],
        |r| {
            let body: String = r.get(2)?;
            let mut body: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let mut take = |field: &str| body.get_mut(field).map(serde_json::Value::take);
            Ok(Difference {
                id: r.get(0)?,
                at: r.get(1)?,
                export: take("export")
                    .and_then(|e| e.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                input: take("input").unwrap_or_default(),
                live: take("live").unwrap_or_default(),
                shadow: take("shadow").unwrap_or_default(),
                refused: take("refused").unwrap_or_default(),
            })
        },
    )?;
    Ok(Some(shadow))
}

/// Forgets `adapter`'s shadow (promoted or dropped).
pub fn end(conn: &mut Conn, adapter: &str) -> Result<()> {
    conn.transaction(|conn| {
        conn.execute(
            "DELETE FROM adapter_shadow_differences WHERE adapter = ?1",
            params![adapter],
        )?;
        conn.execute(
            "DELETE FROM adapter_shadows WHERE adapter = ?1",
            params![adapter],
        )?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{self, Backends};

    #[test]
    fn counts_follow_the_build_and_differences_stay_bounded() {
        testing::each_backend(Backends::Both, |db| {
            db.blocking(|conn| {
                begin(conn, "echo", "2", "aaa")?;
                let one = |matched| Counts {
                    compared: 1,
                    matched,
                    skipped: 1,
                };
                compared(conn, "echo", "aaa", one(1), &[])?;
                for n in 0..25 {
                    // Written a second apart, as a shadow's counts are: the newest is the last.
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    let body = format!("{{\"export\":\"handle-http\",\"input\":{n}}}");
                    compared(conn, "echo", "aaa", one(0), &[body])?;
                }
                // Another replica loading the same build keeps the counts.
                begin(conn, "echo", "2", "aaa")?;
                let shadow = get(conn, "echo")?.unwrap();
                assert_eq!(
                    (shadow.compared, shadow.matched, shadow.skipped),
                    (26, 1, 26)
                );
                assert_eq!(shadow.differences.len(), DIFFERENCES_KEPT as usize);
                assert_eq!(shadow.differences[0].input, 24, "newest first");
                // Several in one write keep their order (writes are a second apart).
                std::thread::sleep(std::time::Duration::from_millis(30));
                let three: Vec<String> =
                    (0..3).map(|n| format!("{{\"input\":\"w{n}\"}}")).collect();
                compared(conn, "echo", "aaa", Counts::default(), &three)?;
                let shadow = get(conn, "echo")?.unwrap();
                let newest: Vec<&serde_json::Value> = shadow
                    .differences
                    .iter()
                    .take(3)
                    .map(|d| &d.input)
                    .collect();
                assert_eq!(newest, ["w2", "w1", "w0"]);
                // A comparison of a build no longer shadowing counts for nothing.
                compared(conn, "echo", "old", one(0), &["{}".into()])?;
                begin(conn, "echo", "3", "bbb")?;
                let shadow = get(conn, "echo")?.unwrap();
                assert_eq!((shadow.compared, shadow.version.as_str()), (0, "3"));
                assert!(shadow.differences.is_empty());
                end(conn, "echo")?;
                assert!(get(conn, "echo")?.is_none());
                Ok(())
            })
            .unwrap();
        });
    }
}
