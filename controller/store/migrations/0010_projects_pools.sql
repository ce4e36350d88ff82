-- Projects as a boundary, worker pools and routing (issue 15, items 1-2).

-- The project a build belongs to: its spec's project (the app's slug unless
-- `expo-build submit --project` named another), or the "project" field of
-- a raw submit; '' for a build of no project (a one-team farm).
ALTER TABLE builds ADD COLUMN project text NOT NULL DEFAULT '';
UPDATE builds SET project = spec->'app'->>'slug' WHERE spec IS NOT NULL AND spec->'app'->>'slug' IS NOT NULL;
CREATE INDEX builds_project_list ON builds (project, submitted_at DESC, id DESC);

-- The projects a developer key is bound to. A bound key sees only their
-- builds; once any live key is bound, unbound developer keys are refused.
CREATE TABLE api_key_projects (
    key_id  text NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
    project text NOT NULL,
    PRIMARY KEY (key_id, project)
);
CREATE INDEX api_key_projects_project ON api_key_projects (project);

-- The pools a worker key may register its workers in. A key bound to
-- pools registers only in them; an unbound worker key may register in a
-- trusted pool only while no worker key is bound at all.
CREATE TABLE api_key_pools (
    key_id text NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
    pool   text NOT NULL,
    PRIMARY KEY (key_id, pool)
);

-- What an admin says about a pool of workers. A pool without a row is
-- untrusted and never runs credentialed builds on the local driver.
CREATE TABLE pools (
    name        text PRIMARY KEY,
    trusted     boolean NOT NULL DEFAULT false,
    allow_local boolean NOT NULL DEFAULT false, -- credentialed builds may run on its local-driver workers
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- The pool every worker joins unless told otherwise: trusted, so a one-team
-- farm keeps building signed apps without configuration.
INSERT INTO pools (name, trusted) VALUES ('default', true);

-- The pools a project's builds may use; a project without rows may use any.
CREATE TABLE project_pools (
    project text NOT NULL,
    pool    text NOT NULL,
    PRIMARY KEY (project, pool)
);

-- A worker's pool and VM driver, from its registration's capabilities.
ALTER TABLE workers ADD COLUMN pool text NOT NULL DEFAULT 'default';
ALTER TABLE workers ADD COLUMN vm_driver text NOT NULL DEFAULT '';

-- A webhook endpoint's projects: empty for every build's events.
ALTER TABLE webhook_endpoints ADD COLUMN projects text[] NOT NULL DEFAULT '{}';
