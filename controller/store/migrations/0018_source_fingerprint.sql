-- The source fingerprint the controller computed from the archive it
-- received (sourcefp; NULL when it computed none: a zip, an archive it
-- could not read, a build stored before this column), and whether the
-- spec declared another. `--reuse` matches only the computed one, of
-- builds without a mismatch: a build stored before this is never reused.
-- builds_reuse (migration 0014, on the declared fingerprint) serves the
-- previous release during an upgrade; the next minor release drops it.
ALTER TABLE builds ADD COLUMN source_fingerprint text;
ALTER TABLE builds ADD COLUMN source_fingerprint_mismatch boolean NOT NULL DEFAULT false;
CREATE INDEX builds_reuse_source ON builds (project, platform, source_fingerprint, completed_at DESC)
	WHERE status = 'completed' AND source_fingerprint IS NOT NULL AND NOT source_fingerprint_mismatch;
