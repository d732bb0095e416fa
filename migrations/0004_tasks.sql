-- v0.2.0 agent team: units of work with a constrained status.
CREATE TABLE IF NOT EXISTS tasks (
    task_id            TEXT PRIMARY KEY NOT NULL,
    title              TEXT NOT NULL,
    description        TEXT,
    agent_profile_name TEXT,
    trace_id           TEXT,
    status             TEXT NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'completed', 'error', 'cancelled')),
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
