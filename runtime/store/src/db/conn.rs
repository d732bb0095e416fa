//! One connection of either backend for one unit of work. The stores write their SQL once,
//! with `?1`-style placeholders (turned into `$1` for PostgreSQL), and read rows through
//! [`Row::get`]; the few places where the dialects differ ask [`Conn::backend`].
//!
//! The stores are plain synchronous functions over a `Conn`: they run on the blocking pool
//! (see [`Db::call`](super::Db::call)), where a SQLite statement runs directly and a
//! PostgreSQL statement is driven to completion on the same thread (see
//! [`connections`](super::connections)). A unit of work always runs
//! to its end, even when whoever asked for it has gone away, so a transaction is never cut
//! half way by a client that disconnected.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use tokio_postgres::types::ToSql;

use super::connections::Connection;
use super::postgres::classify;
use super::value::{FromValue, Param, ToParam, Value, postgres_column};
use crate::error::{Error, Result};

/// Which database a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

pub struct Conn<'c> {
    inner: Inner<'c>,
    in_transaction: bool,
}

enum Inner<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres {
        connection: RefCell<&'c mut Connection>,
        /// Statements whose answer nothing waits for (`BEGIN`, a lock, an insert), sent in one
        /// pipeline with the next statement that is waited for: a round trip saved each.
        deferred: RefCell<Vec<Deferred>>,
    },
}

/// A statement sent with the next one.
struct Deferred {
    sql: String,
    params: Vec<Param<'static>>,
}

/// What a PostgreSQL round trip answers.
enum Answer {
    Changed(u64),
    Rows(Vec<tokio_postgres::Row>),
    Done,
}

#[derive(Clone, Copy)]
enum Ask {
    Execute,
    Query,
    Batch,
}

/// One row of a result.
pub struct Row<'r> {
    inner: RowInner<'r>,
}

enum RowInner<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `index` (from 0) as `T`.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T> {
        let value = match self.inner {
            RowInner::Sqlite(row) => Value::from(row.get_ref(index)?),
            RowInner::Postgres(row) => postgres_column(row, index).map_err(classify)?,
        };
        T::from_value(value)
            .map_err(|e| Error::Internal(anyhow::anyhow!("reading column {index}: {e}")))
    }
}

impl<'c> Conn<'c> {
    pub(super) fn sqlite(conn: &'c rusqlite::Connection) -> Self {
        Self {
            inner: Inner::Sqlite(conn),
            in_transaction: false,
        }
    }

    pub(super) fn postgres(connection: &'c mut Connection) -> Self {
        Self {
            inner: Inner::Postgres {
                connection: RefCell::new(connection),
                deferred: RefCell::default(),
            },
            in_transaction: false,
        }
    }

    pub fn backend(&self) -> Backend {
        match self.inner {
            Inner::Sqlite(_) => Backend::Sqlite,
            Inner::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The underlying SQLite connection, for tests of what only SQLite has (pragmas, checkpoints).
    #[cfg(test)]
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match self.inner {
            Inner::Sqlite(conn) => Some(conn),
            Inner::Postgres { .. } => None,
        }
    }

    /// Runs a statement; returns the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> Result<u64> {
        match self.inner {
            Inner::Sqlite(conn) => {
                let changed = conn
                    .prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(sqlite_params(params)))?;
                Ok(changed as u64)
            }
            Inner::Postgres { .. } => match self.round_trip(sql, params, Ask::Execute)? {
                Answer::Changed(changed) => Ok(changed),
                _ => unreachable!("an execute answers a count"),
            },
        }
    }

    /// Sends what was deferred and then `sql`, in one pipeline, and waits for the answers.
    fn round_trip(&self, sql: &str, params: &[&dyn ToParam], ask: Ask) -> Result<Answer> {
        let Inner::Postgres {
            connection,
            deferred,
        } = &self.inner
        else {
            unreachable!("called for PostgreSQL only")
        };
        let earlier = std::mem::take(&mut *deferred.borrow_mut());
        let bound: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        connection.borrow_mut().drive(async |client, prepared| {
            // Prepared first (once per connection), so the pipeline keeps its order.
            let mut statements = Vec::with_capacity(earlier.len());
            for statement in &earlier {
                statements.push(prepare(client, prepared, &statement.sql).await?);
            }
            let main = match ask {
                Ask::Batch => None,
                Ask::Execute | Ask::Query => Some(prepare(client, prepared, &numbered(sql)).await?),
            };
            let sent = futures_util::future::join_all(statements.iter().zip(&earlier).map(
                |(statement, deferred)| {
                    let params = postgres_params(&deferred.params);
                    async move { client.execute(statement, &params).await }
                },
            ));
            let asked = async {
                let params = postgres_params(&bound);
                match (ask, &main) {
                    (Ask::Execute, Some(statement)) => client
                        .execute(statement, &params)
                        .await
                        .map(Answer::Changed),
                    (Ask::Query, Some(statement)) => {
                        client.query(statement, &params).await.map(Answer::Rows)
                    }
                    _ => client.batch_execute(sql).await.map(|()| Answer::Done),
                }
            };
            let (sent, answer) = tokio::join!(sent, asked);
            for earlier in sent {
                earlier?;
            }
            answer
        })
    }

    /// Every row of a query, each turned into a `T` by `read`.
    pub fn query<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        read: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql, params, usize::MAX, read)
    }

    /// The first row of a query, if there is one.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        read: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut read = Some(read);
        let first = self.rows(sql, params, 1, |row| match read.take() {
            Some(read) => read(row),
            None => unreachable!("one row is read"),
        })?;
        Ok(first.into_iter().next())
    }

    /// Up to `limit` rows of a query.
    fn rows<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        limit: usize,
        mut read: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        match self.inner {
            Inner::Sqlite(conn) => {
                let mut statement = conn.prepare_cached(sql)?;
                let mut rows =
                    statement.query(rusqlite::params_from_iter(sqlite_params(params)))?;
                let mut out = Vec::new();
                while out.len() < limit
                    && let Some(row) = rows.next()?
                {
                    out.push(read(&Row {
                        inner: RowInner::Sqlite(row),
                    })?);
                }
                Ok(out)
            }
            Inner::Postgres { .. } => {
                let Answer::Rows(rows) = self.round_trip(sql, params, Ask::Query)? else {
                    unreachable!("a query answers rows")
                };
                rows.iter()
                    .take(limit)
                    .map(|row| {
                        read(&Row {
                            inner: RowInner::Postgres(row),
                        })
                    })
                    .collect()
            }
        }
    }

    /// The first row of a query that always returns one (an aggregate, say).
    pub fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        read: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, read)?
            .ok_or_else(|| Error::Internal(anyhow::anyhow!("the query returned no row: {sql}")))
    }

    /// Runs several statements without parameters (schema changes).
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self.inner {
            Inner::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Inner::Postgres { .. } => self.round_trip(sql, &[], Ask::Batch).map(drop),
        }
    }

    /// Runs `work` in one transaction: committed when it returns `Ok`, rolled back when it
    /// fails or panics. SQLite takes the write lock at the start (`BEGIN IMMEDIATE`), so a
    /// transaction that reads before it writes never fails on another's lock; PostgreSQL
    /// transactions that must not interleave say so with [`Conn::serialize_on`]. Inside a
    /// transaction, a nested call joins the outer one.
    pub fn transaction<T, E: From<Error>>(
        &mut self,
        work: impl FnOnce(&mut Self) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if self.in_transaction {
            return work(self);
        }
        match &self.inner {
            Inner::Sqlite(_) => self.batch("BEGIN IMMEDIATE")?,
            // Sent with the transaction's first statement.
            Inner::Postgres { .. } => self.defer("BEGIN", Vec::new()),
        }
        self.in_transaction = true;
        let outcome = catch_unwind(AssertUnwindSafe(|| work(self)));
        self.in_transaction = false;
        match outcome {
            Ok(Ok(value)) => {
                self.batch("COMMIT")?;
                Ok(value)
            }
            Ok(Err(e)) => {
                self.roll_back();
                Err(e)
            }
            Err(panic) => {
                self.roll_back();
                resume_unwind(panic)
            }
        }
    }

    /// Ends a failed transaction; one whose `BEGIN` was never sent has nothing to undo.
    fn roll_back(&self) {
        if let Inner::Postgres { deferred, .. } = &self.inner {
            let unsent = std::mem::take(&mut *deferred.borrow_mut());
            if unsent.first().is_some_and(|d| d.sql == "BEGIN") {
                return;
            }
        }
        let _ = self.batch("ROLLBACK");
    }

    fn defer(&self, sql: &str, params: Vec<Param<'static>>) {
        if let Inner::Postgres { deferred, .. } = &self.inner {
            deferred.borrow_mut().push(Deferred {
                sql: numbered(sql).into_owned(),
                params,
            });
        }
    }

    /// Runs a statement whose outcome nothing waits for (an insert, say): with PostgreSQL it
    /// goes with the next statement, or at the end of the unit of work, and a failure shows
    /// there. Inside a transaction it is part of it.
    pub(crate) fn execute_later(&self, sql: &str, params: &[&dyn ToParam]) -> Result<()> {
        match self.inner {
            Inner::Sqlite(_) => self.execute(sql, params).map(drop),
            Inner::Postgres { .. } => {
                let owned = params.iter().map(|p| p.to_param().into_owned()).collect();
                self.defer(sql, owned);
                Ok(())
            }
        }
    }

    /// Sends what was deferred: the end of a unit of work. `outcome` is what the work
    /// returned; a failure of the deferred statements shows when it succeeded.
    pub(super) fn finish<T>(&self, outcome: Result<T>) -> Result<T> {
        let sent = self.flush();
        let value = outcome?;
        sent.map(|()| value)
    }

    /// The last deferred statement is the one waited for, the others go in its pipeline.
    fn flush(&self) -> Result<()> {
        let Inner::Postgres { deferred, .. } = &self.inner else {
            return Ok(());
        };
        let Some(last) = deferred.borrow_mut().pop() else {
            return Ok(());
        };
        let params: Vec<&dyn ToParam> = last.params.iter().map(|p| p as &dyn ToParam).collect();
        self.round_trip(&last.sql, &params, Ask::Execute).map(drop)
    }

    /// Within a transaction, waits until no other transaction holds `key`, and holds it until
    /// this one ends: read-then-write work on shared counts (an adapter's quota, say) stays
    /// exact with replicas writing at once. SQLite transactions are serialized already.
    pub fn serialize_on(&self, key: &str) -> Result<()> {
        debug_assert!(self.in_transaction, "serialize_on outside a transaction");
        // With PostgreSQL, sent with the next statement: the server runs them in order.
        self.defer(
            "SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))",
            vec![Param::Text(Cow::Owned(key.to_owned()))],
        );
        Ok(())
    }

    /// An SQL expression for the database's clock in unix milliseconds. Leases are measured
    /// by it, so replicas whose clocks differ still agree on when one runs out.
    pub fn clock_ms(&self) -> &'static str {
        match self.backend() {
            Backend::Sqlite => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
            Backend::Postgres => "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)",
        }
    }
}

fn sqlite_params<'p>(params: &'p [&dyn ToParam]) -> impl Iterator<Item = Param<'p>> {
    params.iter().map(|p| p.to_param())
}

/// `sql` prepared on this connection, once.
async fn prepare(
    client: &tokio_postgres::Client,
    prepared: &mut HashMap<String, tokio_postgres::Statement>,
    sql: &str,
) -> std::result::Result<tokio_postgres::Statement, tokio_postgres::Error> {
    if let Some(statement) = prepared.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(sql).await?;
    prepared.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

fn postgres_params<'p>(bound: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    bound.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// `?1` placeholders as PostgreSQL writes them (`$1`); quoted text is left alone.
fn numbered(sql: &str) -> Cow<'_, str> {
    if !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('$');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn placeholders_are_numbered_the_postgres_way_outside_quotes() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
        assert!(matches!(
            numbered("SELECT 1"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
