-- App versions kept by the farm (eas.json cli.appVersionSource "remote"):
-- per project, platform and application identifier (Android package, iOS
-- bundle id), the current build version (versionCode / buildNumber, kept
-- as text as eas-cli keeps it: a buildNumber may be "1.2.3") and the app
-- version it was last built or set with. A submit takes the next build
-- version under this row's lock, in the transaction that stores the build.
CREATE TABLE app_versions (
    project        text NOT NULL,
    platform       text NOT NULL CHECK (platform IN ('android', 'ios')),
    application_id text NOT NULL,
    build_version  text NOT NULL,
    app_version    text NOT NULL DEFAULT '',
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, platform, application_id)
);
