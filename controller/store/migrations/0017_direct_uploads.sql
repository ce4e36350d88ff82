-- Direct uploads an attempt has opened (each signs URLs to the object
-- store and may leave parts there until it is completed or swept): the
-- controller refuses more than --max-direct-uploads-per-attempt.
ALTER TABLE build_attempts ADD COLUMN direct_uploads integer NOT NULL DEFAULT 0;
