-- Trust: a worker is bound to the API key that registered it, keys can cap
-- the builds their workers hold, credentials leave once per attempt, and
-- build tokens expire.

-- The most builds the workers of a key may hold at once; NULL: no cap.
ALTER TABLE api_keys ADD COLUMN max_capacity integer CHECK (max_capacity > 0);

-- The key that registered the worker: only it may register the id again or
-- present the worker's tokens. NULL for workers registered before this
-- migration; the next registration binds them.
ALTER TABLE workers ADD COLUMN key_id text REFERENCES api_keys(id) ON DELETE SET NULL;
CREATE INDEX workers_key ON workers (key_id) WHERE key_id IS NOT NULL;
-- Set when the worker handed back too many attempts after fetching their
-- credentials; an admin acknowledges it.
ALTER TABLE workers ADD COLUMN attention_reason text;
ALTER TABLE workers ADD COLUMN attention_at timestamptz;

-- Which sealed files (certs, credentials, secrets) this attempt's VM fetched:
-- each leaves the controller once per attempt.
ALTER TABLE build_attempts ADD COLUMN secrets_fetched text[] NOT NULL DEFAULT '{}';
CREATE INDEX build_attempts_worker_released ON build_attempts (worker_id, ended_at)
    WHERE status = 'released' AND secrets_fetched <> '{}';

-- Build tokens die at this time (and when the submitting key is revoked).
-- The controller sets it from --build-token-ttl; the default (30 days) is
-- what tokens issued before this migration get.
ALTER TABLE builds ADD COLUMN token_expires_at timestamptz NOT NULL DEFAULT now() + interval '30 days';
