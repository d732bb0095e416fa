-- v0.10 conversations: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS conversations (
    id         TEXT PRIMARY KEY NOT NULL,
    agent      TEXT NOT NULL,
    title      TEXT NOT NULL,
    source     TEXT NOT NULL,
    key        TEXT,
    turns      BIGINT NOT NULL DEFAULT 0,
    -- The last ticket given out in its line (see conversation_turns).
    tickets    BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS conversations_source_key ON conversations (source, key)
    WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS conversations_updated ON conversations (updated_at);

CREATE TABLE IF NOT EXISTS conversation_messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             BIGINT NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text            TEXT NOT NULL,
    tool_calls      TEXT,
    trace_id        TEXT,
    at              TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE IF NOT EXISTS conversation_turns (
    conversation_id TEXT NOT NULL,
    ticket          BIGINT NOT NULL,
    holder          TEXT NOT NULL,
    lease_until     BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, ticket)
);
