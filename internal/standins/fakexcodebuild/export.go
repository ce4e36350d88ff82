package main

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/plist"
)

// exportOptions is what the fake reads of -exportOptionsPlist.
type exportOptions struct {
	Method               string            `plist:"method"`
	TeamID               string            `plist:"teamID"`
	SigningStyle         string            `plist:"signingStyle"`
	ProvisioningProfiles map[string]string `plist:"provisioningProfiles"`
}

func exportArchive(inv invocation, stdout, stderr io.Writer) int {
	fail := func(msgs ...string) int {
		for _, m := range msgs {
			fmt.Fprintf(stderr, "error: exportArchive: %s\n", m)
		}
		fmt.Fprintln(stdout, "\n** EXPORT FAILED **")
		return exitExport
	}
	archivePath, exportPath, optionsPath := inv.flags["-archivePath"], inv.flags["-exportPath"], inv.flags["-exportOptionsPlist"]
	if archivePath == "" || exportPath == "" || optionsPath == "" {
		fmt.Fprintln(stderr, "xcodebuild: error: -exportArchive requires -archivePath, -exportPath and -exportOptionsPlist")
		return exitUsage
	}
	if _, err := os.Stat(filepath.Join(archivePath, "Info.plist")); err != nil {
		fmt.Fprintf(stderr, "error: archive not found at path '%s'\n", archivePath)
		fmt.Fprintln(stdout, "** EXPORT FAILED **")
		return exitExport
	}
	optionsData, err := os.ReadFile(optionsPath)
	if err != nil {
		fmt.Fprintf(stderr, "xcodebuild: error: The file “%s” couldn’t be opened because there is no such file.\n", filepath.Base(optionsPath))
		return exitUsage
	}
	var opts exportOptions
	if _, err := plist.Unmarshal(optionsData, &opts); err != nil {
		return fail("The data couldn’t be read because it isn’t in the correct format.")
	}
	if opts.Method == "" {
		opts.Method = "development" // Xcode's default
	}
	want, ok := methodKind(opts.Method)
	if !ok {
		return fail(fmt.Sprintf("exportOptionsPlist error for key \"method\": expected one of {app-store-connect, release-testing, enterprise, debugging, developer-id, mac-application, validation, package}, but found %s", opts.Method))
	}
	appName, bundles, err := bundlesOf(archivePath)
	if err != nil {
		return fail(err.Error())
	}
	installed := installedProfiles()
	chosen := map[string]profile{}
	var msgs []string
	for _, id := range sortedKeys(bundles) {
		noProfile := fmt.Sprintf("No profiles for '%s' were found\n\nError Domain=IDEProfileLocatorErrorDomain Code=1 \"No profiles for '%s' were found\" UserInfo={IDEDistributionIssueSeverity=3, NSLocalizedDescription=No profiles for '%s' were found, NSLocalizedRecoverySuggestion=Xcode couldn't find any %s provisioning profiles matching '%s'. Automatic signing is disabled and unable to generate a profile. To enable automatic signing, pass -allowProvisioningUpdates to xcodebuild.}", id, id, id, want, id)
		name, ok := opts.ProvisioningProfiles[id]
		if !ok {
			msgs = append(msgs, noProfile)
			continue
		}
		p, ok := findProfile(installed, name)
		if !ok || !p.Matches(id) || (opts.TeamID != "" && p.TeamID != opts.TeamID) {
			msgs = append(msgs, noProfile)
			continue
		}
		if p.kind() != want {
			msgs = append(msgs, fmt.Sprintf("Provisioning profile \"%s\" is not an \"%s\" profile.", p.Name, want))
			continue
		}
		chosen[id] = p
	}
	if len(msgs) > 0 {
		return fail(msgs...)
	}
	if err := writeExport(archivePath, exportPath, optionsData, appName, bundles, chosen, opts); err != nil {
		return fail(err.Error())
	}
	fmt.Fprintf(stdout, "Exported %s to: %s\n** EXPORT SUCCEEDED **\n", strings.TrimSuffix(appName, ".app"), exportPath)
	return 0
}

func writeExport(archivePath, exportPath string, optionsData []byte, appName string, bundles map[string]string, chosen map[string]profile, opts exportOptions) error {
	if err := os.MkdirAll(exportPath, 0o755); err != nil {
		return err
	}
	name := strings.TrimSuffix(appName, ".app")
	// Each bundle is re-signed with the export profile.
	embedded := map[string]string{} // path inside Payload → profile file
	for id, rel := range bundles {
		embedded[filepath.ToSlash(filepath.Join("Payload", rel, "embedded.mobileprovision"))] = chosen[id].Path
	}
	f, err := os.Create(filepath.Join(exportPath, name+".ipa"))
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	appsDir := filepath.Join(archivePath, "Products", "Applications")
	err = filepath.WalkDir(filepath.Join(appsDir, appName), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(appsDir, path)
		zipName := "Payload/" + filepath.ToSlash(rel)
		src := path
		if p, ok := embedded[zipName]; ok {
			src = p
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		w, err := zw.Create(zipName)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(exportPath, "ExportOptions.plist"), optionsData, 0o644); err != nil {
		return err
	}
	var summary []map[string]any
	for _, id := range sortedKeys(bundles) {
		p := chosen[id]
		summary = append(summary, map[string]any{
			"name":             filepath.Base(bundles[id]),
			"team":             map[string]any{"id": p.TeamID},
			"profile":          map[string]any{"name": p.Name, "UUID": p.UUID},
			"entitlements":     map[string]any{"application-identifier": p.AppID},
			"bundleIdentifier": id,
		})
	}
	data, err := plist.Marshal(map[string]any{name + ".ipa": summary})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(exportPath, "DistributionSummary.plist"), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(exportPath, "Packaging.log"), []byte(fmt.Sprintf("Exporting %s with method %s (fake xcodebuild)\n", appName, opts.Method)), 0o644)
}
