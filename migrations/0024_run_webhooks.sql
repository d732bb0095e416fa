-- v0.16: completion webhooks of runs. A run's webhook is recorded with the run (in the same
-- transaction), so whichever way the run ends (here, on another replica, interrupted by a
-- stop) a deliverer on any replica finds it once its task has ended, and sends it until a
-- receiver accepts it or its attempts run out.
CREATE TABLE IF NOT EXISTS run_webhooks (
    task_id         TEXT PRIMARY KEY NOT NULL REFERENCES runs (task_id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    -- `pending` (the run runs, or its delivery is under way), `delivered`, `failed` (gave up).
    state           TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    -- Milliseconds since the epoch (the database's clock): no attempt before.
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    lease_holder    TEXT,
    lease_until     INTEGER,
    delivered_at    TEXT,
    last_error      TEXT
);
CREATE INDEX IF NOT EXISTS run_webhooks_due ON run_webhooks (state, next_attempt_at);
-- The delivery log: one row per attempt that got an answer or an error (an attempt cut by a
-- stop leaves none).
CREATE TABLE IF NOT EXISTS run_webhook_attempts (
    task_id     TEXT NOT NULL REFERENCES run_webhooks (task_id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    at          TEXT NOT NULL,
    status_code INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL,
    PRIMARY KEY (task_id, attempt)
);
