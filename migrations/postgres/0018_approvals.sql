-- v0.10 approvals: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS approvals (
    id              TEXT PRIMARY KEY NOT NULL,
    tool            TEXT NOT NULL,
    input           TEXT NOT NULL,
    agent           TEXT NOT NULL,
    conversation_id TEXT,
    task_id         TEXT,
    trace_id        TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    note            TEXT,
    requested_at    TEXT NOT NULL,
    requested_ms    BIGINT NOT NULL,
    decided_at      TEXT,
    checkpoint      TEXT NOT NULL,
    tool_started    INTEGER NOT NULL DEFAULT 0,
    claimed_by      TEXT,
    claim_until     BIGINT,
    resumed         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status, resumed);
