-- v0.12: when each adapter last did something (its entry's `last_activity_at`), kept across
-- restarts. With replicas, the latest of any replica.
CREATE TABLE IF NOT EXISTS adapter_activity (
    name             TEXT PRIMARY KEY NOT NULL,
    last_activity_at TEXT NOT NULL
);
