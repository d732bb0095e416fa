-- v0.7.0: deferred adapter work. A job is a task (its status lives there) plus a payload.
CREATE TABLE IF NOT EXISTS adapter_jobs (
    task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
    adapter TEXT NOT NULL,
    payload BLOB NOT NULL
);
