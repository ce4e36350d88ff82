-- What an installable artifact says about its app, read once when the
-- artifact is recorded (the IPA's Info.plist), so install links never open
-- the file per request. app_bundle_id NULL with app_error '' means never
-- read (a row recorded before this migration, or not an .ipa);
-- app_error says why an .ipa cannot be installed over the air.
ALTER TABLE artifacts ADD COLUMN app_bundle_id text;
ALTER TABLE artifacts ADD COLUMN app_version text NOT NULL DEFAULT '';
ALTER TABLE artifacts ADD COLUMN app_title text NOT NULL DEFAULT '';
ALTER TABLE artifacts ADD COLUMN app_error text NOT NULL DEFAULT '';
