-- v0.20: two writes that were transactions of several round trips become one statement each.
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
