package vmbootstrap

// Placeholders until the package-manager and signing work is merged.

import "github.com/freeagent-build/freeagent/controller/api"

func installArgvs(p api.Project, frozen bool) [][]string {
	if frozen && p.Lockfile != "" {
		return [][]string{{"npm", "ci", "--include=dev"}}
	}
	return [][]string{{"npm", "install"}}
}

func scriptArgv(p api.Project, script string) []string { return []string{"npm", "run", script} }

func prebuildArgv(p api.Project, prebuildCommand, platform string) []string {
	return []string{"npx", "expo", "prebuild", "--no-install", "--platform", platform}
}

func writeKeystore(dir string, ks api.AndroidKeystore) (string, error) { return "", nil }

func gradleSigningEnv(path string, ks api.AndroidKeystore) []string { return nil }

func verifyAndroidArtifact(path string, want api.KeystoreInfo) error { return nil }
