-- v0.10 replicas: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS sealed_settings (
    name       TEXT PRIMARY KEY NOT NULL,
    sealed     BYTEA NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS shared_components (
    name       TEXT PRIMARY KEY NOT NULL,
    wasm       BYTEA NOT NULL,
    grant_toml TEXT,
    sha256     TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS adapter_run_allowance (
    adapter    TEXT PRIMARY KEY NOT NULL,
    tokens     DOUBLE PRECISION NOT NULL,
    updated_ms BIGINT NOT NULL
);

ALTER TABLE adapter_jobs ADD COLUMN IF NOT EXISTS lease_holder TEXT;
ALTER TABLE adapter_jobs ADD COLUMN IF NOT EXISTS lease_until BIGINT;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS runner TEXT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS runner TEXT;

CREATE TABLE IF NOT EXISTS adapter_jobs_open (
    adapter    TEXT PRIMARY KEY NOT NULL,
    unfinished BIGINT NOT NULL DEFAULT 0
);

CREATE OR REPLACE FUNCTION adapter_jobs_open_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'adapter_jobs' THEN
        IF EXISTS (SELECT 1 FROM tasks WHERE task_id = NEW.task_id
                   AND status IN ('pending', 'running')) THEN
            INSERT INTO adapter_jobs_open (adapter, unfinished) VALUES (NEW.adapter, 1)
            ON CONFLICT (adapter) DO UPDATE SET unfinished = adapter_jobs_open.unfinished + 1;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF OLD.status IN ('pending', 'running') THEN
            UPDATE adapter_jobs_open SET unfinished = unfinished - 1
            WHERE adapter = (SELECT adapter FROM adapter_jobs WHERE task_id = OLD.task_id);
        END IF;
        RETURN OLD;
    END IF;
    IF (OLD.status IN ('pending', 'running')) <> (NEW.status IN ('pending', 'running')) THEN
        UPDATE adapter_jobs_open
        SET unfinished = unfinished + CASE WHEN NEW.status IN ('pending', 'running') THEN 1 ELSE -1 END
        WHERE adapter = (SELECT adapter FROM adapter_jobs WHERE task_id = NEW.task_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER adapter_jobs_open_insert AFTER INSERT ON adapter_jobs
    FOR EACH ROW EXECUTE FUNCTION adapter_jobs_open_follow();
CREATE OR REPLACE TRIGGER adapter_jobs_open_status AFTER UPDATE OF status ON tasks
    FOR EACH ROW EXECUTE FUNCTION adapter_jobs_open_follow();
-- Before: the job's row goes with its task.
CREATE OR REPLACE TRIGGER adapter_jobs_open_delete BEFORE DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION adapter_jobs_open_follow();

INSERT INTO adapter_jobs_open (adapter, unfinished)
SELECT j.adapter, count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id
WHERE t.status IN ('pending', 'running') GROUP BY j.adapter
ON CONFLICT (adapter) DO UPDATE SET unfinished = excluded.unfinished;
