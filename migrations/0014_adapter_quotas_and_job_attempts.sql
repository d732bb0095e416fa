-- v0.9: what each adapter stores in its key-value namespace, kept by triggers, so a quota check
-- is one read. Sizes are bytes of key and value. (The step's new columns, which SQLite cannot add
-- with IF NOT EXISTS, are added by the migration code: tasks.schedule_name,
-- adapter_jobs.attempt, adapter_jobs.run_after.)
CREATE TABLE IF NOT EXISTS adapter_kv_usage (
    adapter TEXT PRIMARY KEY NOT NULL,
    bytes   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS adapter_kv_usage_insert AFTER INSERT ON adapter_kv BEGIN
    INSERT INTO adapter_kv_usage (adapter, bytes)
    VALUES (NEW.adapter, octet_length(NEW.key) + octet_length(NEW.value))
    ON CONFLICT (adapter) DO UPDATE SET bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER IF NOT EXISTS adapter_kv_usage_update AFTER UPDATE ON adapter_kv BEGIN
    UPDATE adapter_kv_usage
    SET bytes = bytes - octet_length(OLD.key) - octet_length(OLD.value)
                      + octet_length(NEW.key) + octet_length(NEW.value)
    WHERE adapter = NEW.adapter;
END;

CREATE TRIGGER IF NOT EXISTS adapter_kv_usage_delete AFTER DELETE ON adapter_kv BEGIN
    UPDATE adapter_kv_usage
    SET bytes = bytes - octet_length(OLD.key) - octet_length(OLD.value)
    WHERE adapter = OLD.adapter;
END;

INSERT OR REPLACE INTO adapter_kv_usage (adapter, bytes)
SELECT adapter, sum(octet_length(key) + octet_length(value)) FROM adapter_kv GROUP BY adapter;

CREATE INDEX IF NOT EXISTS adapter_jobs_adapter ON adapter_jobs (adapter);
