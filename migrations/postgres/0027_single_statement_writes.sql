-- v0.20: writes that were transactions of several round trips become one statement each, and
-- a job claim walks pending tasks in the order it takes them.
--
-- An adapter's key-value write within its byte quota (it was a transaction of five
-- statements: the lock, the usage read, the write, begin and commit).
-- Writers of one adapter take turns on its `adapter_kv_usage` row, locked until their
-- transaction ends, which the usage trigger updates anyway. Expired entries are purged only
-- when they are what stands in the way. `claim` writes only over an absent or expired entry.
-- Answers whether it wrote, and, when the quota refused it, the bytes it would have made.
CREATE OR REPLACE FUNCTION adapter_kv_write(
    p_adapter TEXT, p_key TEXT, p_value BYTEA, p_expires_at BIGINT,
    p_quota BIGINT, p_now BIGINT, p_claim BOOLEAN,
    OUT written BOOLEAN, OUT would BIGINT
) LANGUAGE plpgsql AS $$
DECLARE
    used   BIGINT;
    adding BIGINT;
    n      BIGINT;
BEGIN
    SELECT bytes INTO used FROM adapter_kv_usage WHERE adapter = p_adapter FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO adapter_kv_usage (adapter, bytes) VALUES (p_adapter, 0)
            ON CONFLICT (adapter) DO NOTHING;
        SELECT bytes INTO used FROM adapter_kv_usage WHERE adapter = p_adapter FOR UPDATE;
    END IF;
    adding := octet_length(p_key) + octet_length(p_value) - coalesce(
        (SELECT octet_length(key) + octet_length(value) FROM adapter_kv
         WHERE adapter = p_adapter AND key = p_key), 0);
    IF used + adding > p_quota THEN
        DELETE FROM adapter_kv
        WHERE adapter = p_adapter AND expires_at IS NOT NULL AND expires_at <= p_now;
        SELECT bytes INTO used FROM adapter_kv_usage WHERE adapter = p_adapter;
        IF used + adding > p_quota THEN
            written := false;
            would := used + adding;
            RETURN;
        END IF;
    END IF;
    IF p_claim THEN
        INSERT INTO adapter_kv (adapter, key, value, expires_at)
        VALUES (p_adapter, p_key, p_value, p_expires_at)
        ON CONFLICT (adapter, key) DO UPDATE
            SET value = excluded.value, expires_at = excluded.expires_at
            WHERE adapter_kv.expires_at IS NOT NULL AND adapter_kv.expires_at <= p_now;
    ELSE
        INSERT INTO adapter_kv (adapter, key, value, expires_at)
        VALUES (p_adapter, p_key, p_value, p_expires_at)
        ON CONFLICT (adapter, key) DO UPDATE
            SET value = excluded.value, expires_at = excluded.expires_at;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    written := n = 1;
END
$$;

-- A turn's place in a conversation's line, in one statement (it was a transaction of six and
-- a count after it): expired places cleared, a ticket never given out before, and how many
-- live turns are ahead of it; no ticket when `p_alone` was asked and another turn is live.
CREATE OR REPLACE FUNCTION conversation_queue(
    p_id TEXT, p_holder TEXT, p_lease_ms BIGINT, p_alone BOOLEAN,
    OUT taken BIGINT, OUT ahead BIGINT
) LANGUAGE plpgsql AS $$
DECLARE
    now_ms BIGINT := CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT);
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('conversation:' || p_id, 0));
    DELETE FROM conversation_turns WHERE conversation_id = p_id AND lease_until < now_ms;
    SELECT count(*) INTO ahead FROM conversation_turns WHERE conversation_id = p_id;
    IF p_alone AND ahead > 0 THEN
        RETURN;
    END IF;
    UPDATE conversations SET tickets = tickets + 1 WHERE id = p_id RETURNING tickets INTO taken;
    INSERT INTO conversation_turns (conversation_id, ticket, holder, lease_until)
    VALUES (p_id, taken, p_holder, now_ms + p_lease_ms);
END
$$;

-- Queueing an adapter's job once per key (`jobs.enqueue-once`: teamchat's event de-dup), in
-- one statement (it was a transaction of seven, holding the adapter's kv quota for two round
-- trips: every other key-value write of the adapter waited that long). The jobs bound is
-- checked before the claim, so nothing is undone: a full queue refuses an unclaimed key
-- (`pending` says how full), a claimed one is a duplicate either way (no `pending`).
CREATE OR REPLACE FUNCTION adapter_job_enqueue_once(
    p_adapter TEXT, p_key TEXT, p_expires_at BIGINT, p_quota BIGINT, p_now BIGINT,
    p_max_unfinished BIGINT, p_task_id TEXT, p_title TEXT, p_description TEXT,
    p_created_at TEXT, p_payload BYTEA, p_traceparent TEXT,
    OUT queued BOOLEAN, OUT pending BIGINT, OUT would BIGINT
) LANGUAGE plpgsql AS $$
DECLARE
    claimed BOOLEAN;
BEGIN
    queued := false;
    -- The lock `job_queue::enqueue` takes.
    PERFORM pg_advisory_xact_lock(hashtextextended('jobs:' || p_adapter, 0));
    pending := coalesce((SELECT unfinished FROM adapter_jobs_open WHERE adapter = p_adapter), 0);
    IF pending >= p_max_unfinished THEN
        IF EXISTS (SELECT 1 FROM adapter_kv WHERE adapter = p_adapter AND key = p_key
                   AND (expires_at IS NULL OR expires_at > p_now)) THEN
            pending := NULL;
        END IF;
        RETURN;
    END IF;
    SELECT w.written, w.would INTO claimed, would
    FROM adapter_kv_write(p_adapter, p_key, ''::bytea, p_expires_at, p_quota, p_now, true) w;
    pending := NULL;
    IF would IS NOT NULL OR NOT claimed THEN
        RETURN;
    END IF;
    INSERT INTO tasks (task_id, title, description, status, created_at, updated_at)
    VALUES (p_task_id, p_title, p_description, 'pending', p_created_at, p_created_at);
    INSERT INTO adapter_jobs (task_id, adapter, payload, traceparent)
    VALUES (p_task_id, p_adapter, p_payload, p_traceparent);
    queued := true;
END
$$;

-- Pending tasks in the order a job claim takes them (SQLite's index holds the rowid already).
CREATE INDEX IF NOT EXISTS tasks_status_created_rowid ON tasks (status, created_at, rowid);
DROP INDEX IF EXISTS tasks_status_created;
