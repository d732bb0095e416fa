-- v0.14: API tokens (and `approvals.decided_by`, added by the migration code), sent as `Authorization: Bearer`. `hash` is the SHA-256 of the secret,
-- which is shown once and never stored; `hint` its first characters.
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

-- Who changed what: every state-changing request and every refused credential. Never a body
-- or a secret; trimmed by age and count (`[auth] audit_keep_days`, `audit_max_rows`).
CREATE TABLE IF NOT EXISTS audit_log (
    id        TEXT PRIMARY KEY NOT NULL,
    at        TEXT NOT NULL,
    at_ms     INTEGER NOT NULL,
    principal TEXT,
    role      TEXT,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    status    INTEGER NOT NULL,
    peer      TEXT NOT NULL,
    replica   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at_ms);

-- Agent runs each principal started per minute of the database's clock (`[auth]
-- runs_per_minute`); rows of past minutes are deleted.
CREATE TABLE IF NOT EXISTS run_budget (
    principal TEXT NOT NULL,
    minute    INTEGER NOT NULL,
    runs      INTEGER NOT NULL,
    PRIMARY KEY (principal, minute)
);
