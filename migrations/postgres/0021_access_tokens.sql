-- v0.14 API tokens: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS access_tokens (
    name         TEXT PRIMARY KEY NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'member', 'viewer')),
    hint         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    expires_at   TEXT,
    last_used_at TEXT
);
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS decided_by TEXT;

-- The audit log: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS audit_log (
    id        TEXT PRIMARY KEY NOT NULL,
    at        TEXT NOT NULL,
    at_ms     BIGINT NOT NULL,
    principal TEXT,
    role      TEXT,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    status    INTEGER NOT NULL,
    peer      TEXT NOT NULL,
    replica   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at_ms);

-- Runs per principal and minute: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS run_budget (
    principal TEXT NOT NULL,
    minute    BIGINT NOT NULL,
    runs      INTEGER NOT NULL,
    PRIMARY KEY (principal, minute)
);
