-- The reaper expires one-time passwords and VM tokens; index only the live
-- ones so those sweeps never scan the whole attempt history.
CREATE INDEX build_attempts_otp_expiry ON build_attempts (otp_expires_at) WHERE otp_hash IS NOT NULL;
CREATE INDEX build_attempts_vm_token_expiry ON build_attempts (vm_token_expires_at) WHERE vm_token_hash IS NOT NULL;
