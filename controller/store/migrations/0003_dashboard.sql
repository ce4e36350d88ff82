-- Dashboard sessions and worker pause (drain from the controller).

-- A paused worker keeps its running builds but is given no new ones.
ALTER TABLE workers ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- Server-side sessions, so a logout or a revoked key ends a session on every
-- replica. Only a hash of the session id is kept; the CSRF token is derived
-- from the id and never stored.
CREATE TABLE dashboard_sessions (
    id_hash    bytea PRIMARY KEY,
    key_id     text NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
CREATE INDEX dashboard_sessions_key ON dashboard_sessions (key_id);
