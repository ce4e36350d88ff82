package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/standins/fakelaunchctl/session"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// compileResources stands in for the compilers of a product's asset
// catalogs (actool) and storyboards (ibtool). Nothing is compiled, but
// both reach CoreSimulatorService through the launchd session they run
// in, which must be their own user's: run with `sudo -u` from another
// user's session, they fail as the real ones do, with the simulator
// device set they cannot initialise. A process outside any modelled
// session (see internal/standins/fakelaunchctl/session) passes.
func (bc buildContext) compileResources(p *xcode.Project, pr product, stdout io.Writer) error {
	paths, err := p.ResourcePaths(pr.target.Name)
	if err != nil {
		return err
	}
	project := strings.TrimSuffix(filepath.Base(bc.projectPath), ".xcodeproj")
	for _, rel := range paths {
		var step, tool string
		switch filepath.Ext(rel) {
		case ".xcassets":
			step, tool = "CompileAssetCatalog", "actool"
		case ".storyboard", ".xib":
			step, tool = "CompileStoryboard", "ibtool"
		default:
			continue
		}
		path := filepath.Join(pr.settings["PROJECT_DIR"], rel)
		command := fmt.Sprintf("%s %s %s (in target '%s' from project '%s')", step, shellEscape(pr.dir), shellEscape(path), pr.target.Name, project)
		fmt.Fprintf(stdout, "\n%s\n    cd %s\n    /Applications/Xcode.app/Contents/Developer/usr/bin/%s --output-format human-readable-text --compile %s %s\n",
			command, pr.settings["PROJECT_DIR"], tool, shellEscape(pr.dir), shellEscape(path))
		if err := simulatorService(); err != nil {
			fmt.Fprintf(stdout, "%s: error: %v\n", path, err)
			return &buildFailure{command: command, err: fmt.Errorf("Command %s failed with a nonzero exit code", step)}
		}
	}
	return nil
}

// simulatorService fails as Interface Builder's tools fail when
// CoreSimulatorService is not this user's: the caller is in another
// user's launchd session.
func simulatorService() error {
	uid, err := session.Manager()
	if errors.Is(err, session.ErrNotModelled) || err == nil && uid == os.Getuid() {
		return nil
	}
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	return fmt.Errorf("Failed to find a suitable device for the type IBSimDeviceTypeiPad2x (com.apple.dt.Xcode.IBSimDeviceType.iPad-2x) with runtime iOS (Failure reason: Failed to create SimDeviceSet at path %s/Library/Developer/Xcode/UserData/IB Support/Simulator Devices. You'll want to check the logs in ~/Library/Logs/CoreSimulator to see why creating the SimDeviceSet failed.): Failed to initialize simulator device set. (Failure reason: Failed to subscribe to notifications from CoreSimulatorService.): Error returned in reply to notification request: Connection invalid", home)
}
