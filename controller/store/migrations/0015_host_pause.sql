-- A polite guest (issue 19). A worker reports its own pauses beside the
-- admin's (workers.paused): its owner's ("Accept Builds" off in the menu
-- bar) and its host's (the owner's rules hold builds back now: on battery,
-- in use, outside the schedule…, with the reason). None clears another.
ALTER TABLE workers ADD COLUMN owner_paused boolean NOT NULL DEFAULT false;
ALTER TABLE workers ADD COLUMN host_pause_reason text;
