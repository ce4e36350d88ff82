-- Identical-build reuse (issue 18, `expo-build submit --reuse`): the newest
-- completed build of a project and platform with the same source
-- fingerprint, found without reading other builds' specs.
CREATE INDEX builds_reuse ON builds (project, platform, (spec->>'source_fingerprint'), completed_at DESC) WHERE status = 'completed';
