package cli

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// signing is the iOS signing material of a submit or retry.
type signing struct {
	p12      string
	profiles stringList
	certsZip string
}

func (s *signing) any() bool { return s.p12 != "" || len(s.profiles) > 0 || s.certsZip != "" }

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

const maxCertFile = 10 << 20 // the controller's limit per file in the certs zip

// check validates the flags without reading secrets.
func (s *signing) check(platform string) error {
	if !s.any() {
		return nil
	}
	if platform != "" && platform != "ios" && platform != "all" {
		return usageErr("--p12, --provisioning-profile and --certs are iOS signing material; %s builds take none", platform)
	}
	if s.certsZip != "" && (s.p12 != "" || len(s.profiles) > 0) {
		return usageErr("pass either --certs ZIP or --p12 FILE with --provisioning-profile FILE, not both")
	}
	if s.p12 == "" && len(s.profiles) > 0 {
		return usageErr("--provisioning-profile needs --p12 (the signing certificate); or pass a prepared --certs zip")
	}
	if s.p12 != "" && len(s.profiles) == 0 {
		return usageErr("--p12 needs at least one --provisioning-profile FILE.mobileprovision")
	}
	for _, p := range s.profiles {
		if !strings.EqualFold(filepath.Ext(p), ".mobileprovision") {
			return usageErr("--provisioning-profile %s: expected a .mobileprovision file (to choose an eas.json build profile use --profile)", p)
		}
	}
	return nil
}

// zip returns the certs zip the controller expects: one .p12, password.txt
// and the .mobileprovision profiles, built in memory (a few KB). The password
// comes from EXPO_P12_PASSWORD or a hidden prompt, never from a flag.
func (a *App) certsZip(s *signing) ([]byte, error) {
	if s.certsZip != "" {
		raw, err := readLimited(s.certsZip, maxCertFile*4)
		if err != nil {
			return nil, err
		}
		if err := checkCertsZip(raw); err != nil {
			return nil, usageErr("--certs %s: %v", s.certsZip, err)
		}
		return raw, nil
	}
	if s.p12 == "" {
		return nil, nil
	}
	p12, err := readLimited(s.p12, maxCertFile)
	if err != nil {
		return nil, err
	}
	password := a.getenv("EXPO_P12_PASSWORD")
	if password == "" {
		password, err = a.readPassword(fmt.Sprintf("Password of %s: ", filepath.Base(s.p12)))
		if err != nil {
			return nil, usageErr("the .p12 password is needed: set EXPO_P12_PASSWORD or run in a terminal to be asked (%v)", err)
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) error {
		w, err := zw.Create(name)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := add("certificate.p12", p12); err != nil {
		return nil, err
	}
	if err := add("password.txt", []byte(password)); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, p := range s.profiles {
		data, err := readLimited(p, maxCertFile)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(p)
		if seen[strings.ToLower(name)] {
			name = fmt.Sprintf("%d-%s", i, name)
		}
		seen[strings.ToLower(name)] = true
		if err := add(name, data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func readLimited(name string, limit int64) ([]byte, error) {
	data, err := boundedfile.Read(name, limit)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, usageErr("%s is larger than %s; is it the right file?", name, bytesize.SI(limit))
	}
	if err != nil {
		return nil, usageErr("read %s: %v", name, err)
	}
	return data, nil
}

// checkCertsZip applies the controller's rules early, with a clearer message.
func checkCertsZip(raw []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return fmt.Errorf("not a zip archive: %w", err)
	}
	var p12s, passwords int
	for _, f := range zr.File {
		base := path.Base(strings.ReplaceAll(f.Name, "\\", "/"))
		if f.FileInfo().IsDir() || strings.HasPrefix(base, ".") || strings.HasPrefix(f.Name, "__MACOSX/") {
			continue
		}
		switch lower := strings.ToLower(base); {
		case strings.HasSuffix(lower, ".p12"):
			p12s++
		case lower == "password.txt":
			passwords++
		}
	}
	switch {
	case p12s != 1:
		return fmt.Errorf("it holds %d .p12 files; it needs exactly one, with password.txt and the .mobileprovision profiles", p12s)
	case passwords == 0:
		return fmt.Errorf("it has no password.txt holding the .p12's password")
	}
	return nil
}
