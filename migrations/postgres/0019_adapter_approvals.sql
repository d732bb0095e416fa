-- v0.11 approvals of adapters' runs: see the SQLite step of the same number.
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS source TEXT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS outcome TEXT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS then_task TEXT;
CREATE INDEX IF NOT EXISTS approvals_then_task ON approvals (then_task);
