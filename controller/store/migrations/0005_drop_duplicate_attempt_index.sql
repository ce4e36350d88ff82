-- build_attempts_build duplicated the UNIQUE (build_id, number) index: every
-- attempt insert and update paid for both.
DROP INDEX IF EXISTS build_attempts_build;
