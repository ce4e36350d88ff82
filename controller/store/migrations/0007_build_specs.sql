-- Builds the way Expo teams ship them: the resolved build spec the CLI sends,
-- the build's sealed credentials, and per-project variables and farm
-- credentials.

-- The api.BuildSpec of the submit; NULL for a raw API submit.
ALTER TABLE builds ADD COLUMN spec jsonb;
-- The build holds a sealed credentials file (api.BuildCredentials). Like the
-- certificates it is deleted when the build ends; certs_deleted_at records
-- that for both.
ALTER TABLE builds ADD COLUMN has_credentials boolean NOT NULL DEFAULT false;
DROP INDEX builds_certs_live;
CREATE INDEX builds_secrets_live ON builds (completed_at) WHERE (has_certs OR has_credentials) AND certs_deleted_at IS NULL;

-- EAS-style environment variables of a project (the app's slug), one row per
-- environment. The value is sealed under a key derived from the certificate
-- key with "project\0environment\0name" as additional data.
CREATE TABLE project_variables (
    project      text NOT NULL,
    environment  text NOT NULL,
    name         text NOT NULL,
    visibility   text NOT NULL CHECK (visibility IN ('plaintext', 'sensitive', 'secret')),
    type         text NOT NULL CHECK (type IN ('string', 'file')),
    value_sealed bytea NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, environment, name)
);

-- Signing credentials kept on the farm for a project (credentialsSource
-- remote): what identifies them in plain text, the secret part sealed with
-- "project\0platform\0name" as additional data.
CREATE TABLE project_credentials (
    project       text NOT NULL,
    platform      text NOT NULL CHECK (platform IN ('ios', 'android')),
    name          text NOT NULL,
    info          jsonb NOT NULL,
    secret_sealed bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, platform, name)
);
