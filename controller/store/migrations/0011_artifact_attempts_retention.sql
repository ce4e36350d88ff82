-- Artifacts belong to the attempt that uploaded them. A build shows only the
-- artifacts of the attempt that ended it; another attempt's (abandoned by a
-- lease expiry or a re-registration) are never shown and the garbage
-- collector deletes them. Two attempts may upload the same name: each has its
-- own row and object (builds/<id>/attempts/<attempt>/artifact-<name>).
-- attempt_id '' marks an artifact stored before this migration, at its old
-- key (builds/<id>/artifact-<name>), shown as before.
ALTER TABLE artifacts ADD COLUMN attempt_id text NOT NULL DEFAULT '';
ALTER TABLE artifacts DROP CONSTRAINT artifacts_pkey;
ALTER TABLE artifacts ADD PRIMARY KEY (build_id, attempt_id, name);
-- The collector's search for artifacts of attempts that did not end their build.
CREATE INDEX artifacts_attempt ON artifacts (attempt_id) WHERE attempt_id <> '';

-- Retention: when the collector deleted an ended build's artifacts, source
-- and log. The build's record stays, and says so.
ALTER TABLE builds ADD COLUMN artifacts_deleted_at timestamptz;
ALTER TABLE builds ADD COLUMN source_deleted_at timestamptz;
ALTER TABLE builds ADD COLUMN logs_deleted_at timestamptz;
CREATE INDEX builds_artifacts_live ON builds (completed_at) WHERE artifacts_deleted_at IS NULL AND completed_at IS NOT NULL;
CREATE INDEX builds_source_live ON builds (completed_at) WHERE source_deleted_at IS NULL AND completed_at IS NOT NULL;
CREATE INDEX builds_logs_live ON builds (completed_at) WHERE logs_deleted_at IS NULL AND completed_at IS NOT NULL;
