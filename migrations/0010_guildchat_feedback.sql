-- v0.7.0: thumbs-up / thumbs-down on guildchat result cards; one vote per user per message.
CREATE TABLE IF NOT EXISTS guildchat_feedback (
    message_id TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    value      TEXT NOT NULL CHECK (value IN ('up', 'down')),
    trace_id   TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (message_id, user_id)
);
