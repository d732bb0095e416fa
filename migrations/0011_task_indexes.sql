-- v0.7.0: the task list is read newest first, optionally filtered by status.
CREATE INDEX IF NOT EXISTS tasks_created ON tasks (created_at);
CREATE INDEX IF NOT EXISTS tasks_status_created ON tasks (status, created_at);
