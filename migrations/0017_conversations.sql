-- v0.10 conversations: a chat, or an adapter's thread, with its messages in order. `key` is
-- what an adapter calls the thread (unique per source); a dashboard chat has none.
CREATE TABLE IF NOT EXISTS conversations (
    id         TEXT PRIMARY KEY NOT NULL,
    agent      TEXT NOT NULL,
    title      TEXT NOT NULL,
    source     TEXT NOT NULL,
    key        TEXT,
    turns      INTEGER NOT NULL DEFAULT 0,
    -- The last ticket given out in its line (see conversation_turns).
    tickets    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS conversations_source_key ON conversations (source, key)
    WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS conversations_updated ON conversations (updated_at);

CREATE TABLE IF NOT EXISTS conversation_messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text            TEXT NOT NULL,
    tool_calls      TEXT,
    trace_id        TEXT,
    at              TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

-- A conversation's line: one turn answered at a time, in the order they arrived (across
-- replicas). A ticket holds while its replica renews it (unix ms, the database's clock).
CREATE TABLE IF NOT EXISTS conversation_turns (
    conversation_id TEXT NOT NULL,
    ticket          INTEGER NOT NULL,
    holder          TEXT NOT NULL,
    lease_until     INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, ticket)
);
