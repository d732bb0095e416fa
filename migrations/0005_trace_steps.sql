-- v0.4.0 observability: per-step rows of a trace. `step` orders LLM calls and tool
-- invocations on one timeline.
CREATE TABLE IF NOT EXISTS llm_calls (
    id            INTEGER PRIMARY KEY,
    trace_id      TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    step          INTEGER NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error_message TEXT,
    response_text TEXT,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    started_at    TEXT NOT NULL,
    latency_ms    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_calls_trace ON llm_calls (trace_id, step);

CREATE TABLE IF NOT EXISTS tool_invocations (
    id            INTEGER PRIMARY KEY,
    trace_id      TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    step          INTEGER NOT NULL,
    call_id       TEXT,
    tool_name     TEXT NOT NULL,
    input         TEXT NOT NULL,
    output        TEXT,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error_message TEXT,
    started_at    TEXT NOT NULL,
    latency_ms    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_invocations_trace ON tool_invocations (trace_id, step);
