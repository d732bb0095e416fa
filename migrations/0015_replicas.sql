-- v0.10 replicas. Leases: one holder at a time for what must run once across replicas (the
-- scheduler, a gateway connection), with a token that grows at every change of holder.
-- Secrets written through the API, sealed (with PostgreSQL; SQLite keeps them in .env).
-- Components installed into the database, which every replica loads. Each adapter's agent-run
-- allowance. (The step's new columns, which SQLite cannot add with IF NOT EXISTS, are added by
-- the migration code: adapter_jobs.lease_holder and lease_until, the lease of the replica
-- running a job; tasks.runner and traces.runner, the replica running a task or a run.)
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS sealed_settings (
    name       TEXT PRIMARY KEY NOT NULL,
    sealed     BLOB NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS shared_components (
    name       TEXT PRIMARY KEY NOT NULL,
    wasm       BLOB NOT NULL,
    grant_toml TEXT,
    sha256     TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS adapter_run_allowance (
    adapter    TEXT PRIMARY KEY NOT NULL,
    tokens     REAL NOT NULL,
    updated_ms INTEGER NOT NULL
);
