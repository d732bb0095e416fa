-- v0.10 observability. A job keeps the W3C trace context (traceparent) of the request that
-- enqueued it, so its run continues that trace on whichever replica runs it.
ALTER TABLE adapter_jobs ADD COLUMN IF NOT EXISTS traceparent TEXT;
