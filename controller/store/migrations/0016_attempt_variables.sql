-- A build's variables are decided at the claim. The claim copies the
-- project's variables of the build's environment, still sealed, into the
-- attempt: its VM reads those (GET /api/builds/{id}/spec), never ones set
-- later. The sweep deletes the copies once the attempt ended.
CREATE TABLE attempt_variables (
    attempt_id   text NOT NULL REFERENCES build_attempts(id) ON DELETE CASCADE,
    name         text NOT NULL,
    visibility   text NOT NULL,
    type         text NOT NULL,
    value_sealed bytea NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (attempt_id, name)
);
-- Set by a claim that fixed the attempt's variables; an attempt the
-- previous release claimed has none fixed, and its VM reads them live.
ALTER TABLE build_attempts ADD COLUMN variables_fixed boolean NOT NULL DEFAULT false;

-- A keyed hash of each variable's value (HMAC-SHA256 under a key derived
-- from the certificate key), for comparing environments without a value in
-- the clear; value_hmac_of is sha256(value_sealed) of the value it was made
-- for, so a value the previous release replaced leaves no stale hash.
ALTER TABLE project_variables ADD COLUMN value_hmac bytea;
ALTER TABLE project_variables ADD COLUMN value_hmac_of bytea;

-- The digest of the variables the build's latest attempt was claimed with
-- (store.environmentDigest); reuse matches it. NULL: unknown, never reused.
ALTER TABLE builds ADD COLUMN env_digest bytea;
