package bundle

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Spec says what goes into the bundle.
type Spec struct {
	Dir         string // FreeAgent.app is created (replaced) in it
	Describe    string // `git describe --tags --always --dirty`
	Freeagent   string // the host binary (thin or universal)
	FreeagentVM string // the guest binary (darwin/arm64: Tart guests are Apple silicon)
}

// Assemble builds Dir/FreeAgent.app and returns its path:
//
//	Contents/Info.plist, PkgInfo
//	Contents/MacOS/freeagent
//	Contents/Resources/freeagent-vm, FreeAgent.icns
func Assemble(s Spec) (string, error) {
	app := filepath.Join(s.Dir, AppName)
	if err := os.RemoveAll(app); err != nil {
		return "", fmt.Errorf("remove the old %s: %w", app, err)
	}
	contents := filepath.Join(app, "Contents")
	for _, d := range []string{"MacOS", "Resources"} {
		if err := os.MkdirAll(filepath.Join(contents, d), 0o755); err != nil {
			return "", fmt.Errorf("create the bundle: %w", err)
		}
	}
	info, err := NewInfo(s.Describe).Render()
	if err != nil {
		return "", err
	}
	icon, err := Icon()
	if err != nil {
		return "", err
	}
	files := []struct {
		path string
		data []byte
	}{
		{"Info.plist", info},
		{"PkgInfo", []byte("APPL????")},
		{filepath.Join("Resources", IconName+".icns"), icon},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(contents, f.path), f.data, 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if err := copyExecutable(s.Freeagent, filepath.Join(contents, "MacOS", Executable)); err != nil {
		return "", err
	}
	if err := copyExecutable(s.FreeagentVM, filepath.Join(contents, "Resources", GuestBinary)); err != nil {
		return "", err
	}
	return app, nil
}

func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", filepath.Base(to), err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", filepath.Base(to), err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s into the bundle: %w", from, err)
	}
	return nil
}
