-- Webhooks: endpoints, and deliveries fanned out from the sealed event log
-- (an outbox: a delivery row exists before any attempt, so a restart loses
-- none), with a log of every attempt.

CREATE TABLE webhook_endpoints (
    id             text PRIMARY KEY,
    url            text NOT NULL,
    event_types    text[] NOT NULL,          -- exact types, "build.*" prefixes, or "*"
    description    text NOT NULL DEFAULT '',
    secret_sealed  bytea NOT NULL,           -- AES-GCM under a key derived from the certificate key
    after_sequence bigint NOT NULL,          -- events up to here predate the endpoint
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_deliveries (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    endpoint_id        text NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    event_id           uuid NOT NULL,
    event_sequence     bigint NOT NULL,
    event_type         text NOT NULL,
    body               bytea NOT NULL,       -- the exact bytes every attempt sends
    status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts           integer NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_response_code integer,
    last_error         text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    delivered_at       timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, event_sequence DESC);

CREATE TABLE webhook_attempts (
    delivery_id   uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    number        integer NOT NULL,
    attempted_at  timestamptz NOT NULL DEFAULT now(),
    response_code integer,
    error         text,
    duration_ms   integer NOT NULL,
    PRIMARY KEY (delivery_id, number)
);

-- How far the fan-out has read the event log; its row lock makes one
-- replica at a time fan out. Starts at the log's end: history before
-- webhooks existed is not delivered.
CREATE TABLE webhook_cursor (
    id       integer PRIMARY KEY CHECK (id = 1),
    sequence bigint NOT NULL
);
INSERT INTO webhook_cursor (id, sequence) SELECT 1, COALESCE(max(sequence), 0) FROM event_chain;
