-- v0.7.0: the operator's enable/disable choice per adapter, kept across restarts.
CREATE TABLE IF NOT EXISTS adapter_state (
    name       TEXT PRIMARY KEY NOT NULL,
    enabled    INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    updated_at TEXT NOT NULL
);
