-- v0.7.0: trace list order, child-trace lookup, and the scheduler's due scan.
CREATE INDEX IF NOT EXISTS traces_created ON traces (created_at);
CREATE INDEX IF NOT EXISTS traces_parent ON traces (parent_trace_id);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (enabled, next_run_at);
