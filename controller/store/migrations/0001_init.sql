-- Free Agent controller schema, version 1.

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'developer', 'worker')),
    key_hash     bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE TABLE workers (
    id                    text PRIMARY KEY,
    name                  text NOT NULL,
    capabilities          jsonb NOT NULL DEFAULT '{}',
    instance_id           text NOT NULL,
    status                text NOT NULL DEFAULT 'online' CHECK (status IN ('online', 'offline', 'unregistered')),
    token_hash            bytea NOT NULL,
    token_issued_at       timestamptz NOT NULL,
    token_expires_at      timestamptz NOT NULL,
    prev_token_hash       bytea,
    prev_token_expires_at timestamptz,
    registered_at         timestamptz NOT NULL DEFAULT now(),
    last_seen_at          timestamptz NOT NULL DEFAULT now(),
    builds_completed      bigint NOT NULL DEFAULT 0,
    builds_failed         bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX workers_token_hash ON workers (token_hash);
CREATE INDEX workers_prev_token_hash ON workers (prev_token_hash) WHERE prev_token_hash IS NOT NULL;
CREATE INDEX workers_online_last_seen ON workers (last_seen_at) WHERE status = 'online';

CREATE TABLE builds (
    id                 text PRIMARY KEY,
    status             text NOT NULL CHECK (status IN ('pending', 'assigned', 'building', 'completed', 'failed', 'cancelled')),
    platform           text NOT NULL CHECK (platform IN ('ios', 'android')),
    profile            text NOT NULL DEFAULT '',
    priority           smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 3),
    token_hash         bytea NOT NULL UNIQUE,
    submitted_by       text REFERENCES api_keys(id) ON DELETE SET NULL,
    idempotency_key    text,
    retry_of           text REFERENCES builds(id) ON DELETE SET NULL,
    source_size        bigint NOT NULL,
    source_sha256      text NOT NULL,
    source_format      text NOT NULL CHECK (source_format IN ('tar.gz', 'zip')),
    has_certs          boolean NOT NULL DEFAULT false,
    certs_deleted_at   timestamptz,
    base_image         text,
    timeout_seconds    integer NOT NULL,
    attempts           integer NOT NULL DEFAULT 0,
    max_attempts       integer NOT NULL DEFAULT 5,
    run_after          timestamptz NOT NULL DEFAULT now(),
    worker_id          text REFERENCES workers(id) ON DELETE SET NULL,
    attempt_id         text,
    lease_expires_at   timestamptz,
    cancel_requested   boolean NOT NULL DEFAULT false,
    phase              text NOT NULL DEFAULT '',
    progress           smallint,
    log_length         bigint NOT NULL DEFAULT 0,
    submitted_at       timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    completed_at       timestamptz,
    error_message      text,
    error_code         text
);
-- The claim path: only claimable rows, in claim order. Stays small however
-- many finished builds the table holds.
CREATE INDEX builds_claim ON builds (priority, submitted_at, id) WHERE status = 'pending';
CREATE INDEX builds_running_lease ON builds (lease_expires_at) WHERE status IN ('assigned', 'building');
CREATE INDEX builds_list ON builds (submitted_at DESC, id DESC);
CREATE INDEX builds_status_list ON builds (status, submitted_at DESC, id DESC);
CREATE INDEX builds_worker ON builds (worker_id, submitted_at DESC) WHERE worker_id IS NOT NULL;
CREATE UNIQUE INDEX builds_idempotency ON builds (submitted_by, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX builds_certs_live ON builds (completed_at) WHERE has_certs AND certs_deleted_at IS NULL;

CREATE TABLE build_attempts (
    id                 text PRIMARY KEY,
    build_id           text NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    number             integer NOT NULL,
    worker_id          text NOT NULL,
    worker_instance    text NOT NULL,
    status             text NOT NULL CHECK (status IN ('assigned', 'running', 'completed', 'failed', 'expired', 'released', 'cancelled', 'timed_out')),
    lease_token_hash   bytea NOT NULL,
    otp_hash           bytea,
    otp_expires_at     timestamptz,
    vm_token_hash      bytea,
    vm_token_expires_at timestamptz,
    started_at         timestamptz NOT NULL DEFAULT now(),
    ended_at           timestamptz,
    error_message      text,
    error_code         text,
    result             jsonb,
    UNIQUE (build_id, number)
);
CREATE INDEX build_attempts_build ON build_attempts (build_id, number);
CREATE INDEX build_attempts_live_worker ON build_attempts (worker_id) WHERE status IN ('assigned', 'running');
CREATE UNIQUE INDEX build_attempts_otp ON build_attempts (otp_hash) WHERE otp_hash IS NOT NULL;
CREATE UNIQUE INDEX build_attempts_vm_token ON build_attempts (vm_token_hash) WHERE vm_token_hash IS NOT NULL;

CREATE TABLE build_logs (
    build_id   text NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    byte_offset bigint NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (build_id, byte_offset)
);

CREATE TABLE artifacts (
    build_id   text NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    name       text NOT NULL,
    size       bigint NOT NULL,
    sha256     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, name)
);
