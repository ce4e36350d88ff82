-- The audit event log (hash chain) and the registry of controller replicas.
--
-- A transaction appends its events with an ord drawn from events_ord at its
-- very end, after it holds every row lock it needs: a transaction that waited
-- for another one always draws the larger ord, so ord order respects
-- causality without serialising writers. The sealer later appends each final
-- event to event_chain, in ord order, with its sequence and hashes (see
-- store/events.go for when an ord is final).
CREATE SEQUENCE events_ord;

-- Append-only; ord is the key, so an event costs one heap row and one index
-- entry. The payload is json (text kept as written: the controller writes
-- it compact with sorted keys, which the hash covers).
CREATE TABLE events (
    ord                  bigint PRIMARY KEY DEFAULT nextval('events_ord'),
    id                   uuid NOT NULL DEFAULT gen_random_uuid(),
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    event_type           text NOT NULL,
    entity_type          text NOT NULL,
    entity_id            text NOT NULL,
    payload              json NOT NULL DEFAULT '{}',
    source_controller_id text NOT NULL DEFAULT ''
);

-- The sealed chain, also append-only: sequence n is the event at ord, with
-- the hash of its predecessor and its own.
CREATE TABLE event_chain (
    sequence      bigint PRIMARY KEY,
    ord           bigint NOT NULL,
    previous_hash text NOT NULL,
    event_hash    text NOT NULL
);

-- What existed before the log began gets one baseline event each, so a
-- replay of the log alone reproduces every current state.
INSERT INTO events (event_type, entity_type, entity_id, payload, source_controller_id)
SELECT 'worker.baseline', 'worker', id, json_build_object('status', status), 'migration'
FROM workers ORDER BY registered_at, id;
INSERT INTO events (event_type, entity_type, entity_id, payload, source_controller_id)
SELECT 'build.baseline', 'build', id, ('{"platform":' || to_json(platform)::text || ',"status":' || to_json(status)::text || '}')::json, 'migration'
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
