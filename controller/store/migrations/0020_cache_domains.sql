-- Cache domains: the builds that may share dependency caches. The claim
-- decides an attempt's domain (store.cacheDomain: its environment, and
-- whether it holds secrets, from the variables it fixes and its signing
-- credentials) and keeps it here; the keys the worker and the VM get are
-- bound to it (cachekey.Qualify), so a build with secrets never restores
-- what one without them saved. '' for an attempt claimed before this.
ALTER TABLE build_attempts ADD COLUMN cache_domain text NOT NULL DEFAULT '';

-- What an admin says of a project (freeagent-controller projects
-- cache-domain): one_cache_domain makes all its builds one cache domain,
-- for a team whose every build is equally trusted.
CREATE TABLE project_settings (
    project          text PRIMARY KEY,
    one_cache_domain boolean NOT NULL DEFAULT false,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
