package vmbootstrap

// Placeholders until the package-manager and signing work is merged.

import "github.com/freeagent-build/freeagent/controller/api"

func writeKeystore(dir string, ks api.AndroidKeystore) (string, error) { return "", nil }

func gradleSigningEnv(path string, ks api.AndroidKeystore) []string { return nil }

func verifyAndroidArtifact(path string, want api.KeystoreInfo) error { return nil }
