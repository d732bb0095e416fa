-- v0.7.0 command center: cron schedules. Timestamps are UTC RFC 3339.
CREATE TABLE IF NOT EXISTS schedules (
    name               TEXT PRIMARY KEY NOT NULL,
    cron_expression    TEXT NOT NULL,
    agent_profile_name TEXT NOT NULL,
    prompt             TEXT NOT NULL,
    enabled            INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    catch_up_policy    TEXT NOT NULL DEFAULT 'coalesce' CHECK (catch_up_policy IN ('coalesce', 'all', 'skip')),
    last_run_at        TEXT,
    next_run_at        TEXT,
    last_trace_id      TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
