//! Store tests run against both backends: a SQLite file in a temporary folder, and a fresh
//! database on the PostgreSQL test server (tests/shared/postgres.rs).

use std::sync::LazyLock;

use super::Db;

// Shared with the end-to-end tests and benches, which use more of it (and need its `pub`).
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../tests/shared/postgres.rs"]
mod postgres_server;
// The one way tests and benches wait, which the server module uses (a part of it).
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../tests/shared/wait.rs"]
mod wait;

/// Which backends a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backends {
    Both,
    PostgresOnly,
}

/// Drives the PostgreSQL connections of synchronous tests.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

/// Runs `test` once per backend, each time with a freshly migrated database.
pub fn each_backend(which: Backends, test: impl Fn(&Db)) {
    if which == Backends::Both {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_sqlite(&dir.path().join(super::FILE_NAME)).unwrap();
        test(&db);
    }
    if let Some(server) = postgres_server::postgres_server() {
        let url = server.fresh_database();
        let db = RUNTIME.block_on(Db::connect_postgres(&url, 4)).unwrap();
        test(&db);
    }
}

/// Runs `test` with a connection of each backend (see [`each_backend`]).
pub fn each_conn(which: Backends, test: impl Fn(&mut super::Conn<'_>)) {
    each_backend(which, |db| {
        db.blocking(|conn| {
            test(conn);
            Ok(())
        })
        .unwrap();
    });
}

/// Runs async test code on the runtime the test databases use.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}
