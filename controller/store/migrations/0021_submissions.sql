-- Submissions to the stores (Google Play, App Store Connect): one row per
-- submission of a build's archive, with
-- its status, the store's own error text and a bounded log. The runner
-- claims queued rows with a lease (SKIP LOCKED), as workers claim builds,
-- so one replica submits each; store_state keeps what a resumed try needs
-- (the Play edit id) so a restart never uploads twice to the same edit.
CREATE TABLE submissions (
    id                 text PRIMARY KEY,
    project            text NOT NULL DEFAULT '',
    platform           text NOT NULL CHECK (platform IN ('android', 'ios')),
    build_id           text NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    status             text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'in_progress', 'succeeded', 'failed')),
    profile            jsonb NOT NULL,            -- api.SubmitProfile
    credential_name    text NOT NULL DEFAULT '',  -- a project submit credential, when none came with the submission
    credentials_sealed bytea,                     -- given with this submission only; dropped when it ends
    submitted_by       text REFERENCES api_keys(id) ON DELETE SET NULL,
    attempts           integer NOT NULL DEFAULT 0,
    lease_owner        text,
    lease_expires_at   timestamptz,
    store_state        jsonb NOT NULL DEFAULT '{}',
    log                text NOT NULL DEFAULT '',
    error_message      text,
    result             jsonb,                     -- api.SubmissionResult
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    completed_at       timestamptz
);
CREATE INDEX submissions_claim ON submissions (created_at, id) WHERE status IN ('queued', 'in_progress');
CREATE INDEX submissions_build ON submissions (build_id, created_at DESC);

-- Credentials for submitting (a Google service account key, an App Store
-- Connect API key), per project, sealed like the farm's keystores.
CREATE TABLE project_submit_credentials (
    project       text NOT NULL,
    platform      text NOT NULL CHECK (platform IN ('android', 'ios')),
    name          text NOT NULL,
    info          jsonb NOT NULL,   -- what identifies it (the account's e-mail, the key's id), never the secret
    secret_sealed bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, platform, name)
);
