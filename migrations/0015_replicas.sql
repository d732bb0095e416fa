-- v0.10 replicas. Leases: one holder at a time for what must run once across replicas (the
-- scheduler, a gateway connection), with a token that grows at every change of holder.
-- Secrets written through the API, sealed (with PostgreSQL; SQLite keeps them in .env).
-- Components installed into the database, which every replica loads. Each adapter's agent-run
-- allowance. Each adapter's unfinished jobs, kept by triggers, so its quota check is one read
-- however many wait. (The step's new columns, which SQLite cannot add with IF NOT EXISTS, are added by
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

CREATE TABLE IF NOT EXISTS adapter_jobs_open (
    adapter    TEXT PRIMARY KEY NOT NULL,
    unfinished INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS adapter_jobs_open_insert AFTER INSERT ON adapter_jobs
WHEN (SELECT status FROM tasks WHERE task_id = NEW.task_id) IN ('pending', 'running') BEGIN
    INSERT INTO adapter_jobs_open (adapter, unfinished) VALUES (NEW.adapter, 1)
    ON CONFLICT (adapter) DO UPDATE SET unfinished = unfinished + 1;
END;

CREATE TRIGGER IF NOT EXISTS adapter_jobs_open_status AFTER UPDATE OF status ON tasks
WHEN (OLD.status IN ('pending', 'running')) != (NEW.status IN ('pending', 'running')) BEGIN
    UPDATE adapter_jobs_open
    SET unfinished = unfinished + CASE WHEN NEW.status IN ('pending', 'running') THEN 1 ELSE -1 END
    WHERE adapter = (SELECT adapter FROM adapter_jobs WHERE task_id = NEW.task_id);
END;

-- Before: the job's row goes with its task.
CREATE TRIGGER IF NOT EXISTS adapter_jobs_open_delete BEFORE DELETE ON tasks
WHEN OLD.status IN ('pending', 'running') BEGIN
    UPDATE adapter_jobs_open SET unfinished = unfinished - 1
    WHERE adapter = (SELECT adapter FROM adapter_jobs WHERE task_id = OLD.task_id);
END;

INSERT OR REPLACE INTO adapter_jobs_open (adapter, unfinished)
SELECT j.adapter, count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id
WHERE t.status IN ('pending', 'running') GROUP BY j.adapter;
