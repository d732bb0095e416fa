-- v0.10 approvals: a run paused before a tool call that a person must approve. `checkpoint`
-- holds the paused run (its messages and the rest of its turn) so any replica can go on with
-- it once decided. `claimed_by`/`claim_until` (unix ms, the database's clock) say who goes on
-- with it now; `resumed` is set once the run went past it.
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
    requested_ms    INTEGER NOT NULL,
    decided_at      TEXT,
    checkpoint      TEXT NOT NULL,
    tool_started    INTEGER NOT NULL DEFAULT 0,
    claimed_by      TEXT,
    claim_until     INTEGER,
    resumed         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status, resumed);
