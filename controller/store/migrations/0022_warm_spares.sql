-- Warm spares made visible. A worker reports its warm spare with its
-- pauses (PUT /api/workers/pause): spare_state is NULL while it keeps none
-- (spares off, a driver without them, an agent that predates them), else
-- none, booting, ready, suspended or failed, with why and since when, and
-- its hit and miss counts since its agent started.
ALTER TABLE workers ADD COLUMN spare_state text;
ALTER TABLE workers ADD COLUMN spare_reason text NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN spare_since timestamptz;
ALTER TABLE workers ADD COLUMN spare_hits bigint NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN spare_misses bigint NOT NULL DEFAULT 0;

-- An attempt's VM, from the first heartbeat that carries it: vm_spare is
-- 'hit' (a warm spare), 'miss' (a fresh VM on a worker that keeps spares)
-- or '' (one that keeps none); vm_phase_ms the claim to the VM ready. Both
-- NULL until reported.
ALTER TABLE build_attempts ADD COLUMN vm_spare text;
ALTER TABLE build_attempts ADD COLUMN vm_phase_ms bigint;
