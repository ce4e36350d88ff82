-- The audit event log (hash chain) and the registry of controller replicas.
--
-- A transaction appends its events with sequence NULL and an ord drawn from
-- events_ord at its very end, after it holds every row lock it needs: a
-- transaction that waited for another one always draws the larger ord, so ord
-- order respects causality without serialising writers. The sealer later
-- gives final events their sequence and hashes, in ord order (see
-- store/events.go for when an ord is final).
CREATE SEQUENCE events_ord;

CREATE TABLE events (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    ord                  bigint NOT NULL DEFAULT nextval('events_ord'),
    sequence             bigint UNIQUE,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    event_type           text NOT NULL,
    entity_type          text NOT NULL,
    entity_id            text NOT NULL,
    payload              jsonb NOT NULL DEFAULT '{}',
    source_controller_id text NOT NULL DEFAULT '',
    previous_hash        text,
    event_hash           text
);
CREATE INDEX events_unsealed ON events (ord) WHERE sequence IS NULL;
CREATE INDEX events_entity ON events (entity_type, entity_id, ord);

-- What existed before the log began gets one baseline event each, so a
-- replay of the log alone reproduces every current state.
INSERT INTO events (event_type, entity_type, entity_id, payload, source_controller_id)
SELECT 'worker.baseline', 'worker', id, jsonb_build_object('status', status), 'migration'
FROM workers ORDER BY registered_at, id;
INSERT INTO events (event_type, entity_type, entity_id, payload, source_controller_id)
SELECT 'build.baseline', 'build', id, jsonb_build_object('status', status, 'platform', platform), 'migration'
FROM builds ORDER BY submitted_at, id;

CREATE TABLE controllers (
    id                text PRIMARY KEY,
    name              text NOT NULL,
    url               text NOT NULL,
    version           text NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL
);
