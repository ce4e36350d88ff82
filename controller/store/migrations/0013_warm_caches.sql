-- Warm builds (issue 18). A worker reports the dependency-cache keys it
-- holds (PUT /api/workers/cache, the newest 200) and its cache's size and
-- hit counts; the claim prefers, among pending builds of one priority,
-- those whose cache_keys the polling worker holds. builds.cache_keys is
-- the spec's caches[].key, copied at submit so the claim reads no JSON.
CREATE TABLE worker_cache_keys (
    worker_id  text NOT NULL REFERENCES workers(id) ON DELETE CASCADE,
    cache_key  text NOT NULL,
    PRIMARY KEY (worker_id, cache_key)
);
ALTER TABLE workers ADD COLUMN cache_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cache_hits bigint NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cache_misses bigint NOT NULL DEFAULT 0;
ALTER TABLE builds ADD COLUMN cache_keys text[] NOT NULL DEFAULT '{}';
