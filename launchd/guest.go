package launchd

// The in-VM agent. The template build script (scripts/build-vm-template.sh)
// installs the checked-in files of guest/ into the image:
// guest/freeagent-vm-launcher at GuestLauncherPath and guest/GuestLabel.plist
// in the guest user's ~/Library/LaunchAgents. A test keeps the checked-in
// plist equal to GuestJob's rendering.
const (
	GuestLabel = "build.freeagent.vm"
	// GuestLauncherPath is the launcher inside the image; the freeagent-vm
	// baked in next to it is the fallback when the shared folder has none.
	GuestLauncherPath = "/usr/local/libexec/freeagent/freeagent-vm-launcher"
	// GuestLogPath collects the bootstrap's diagnostics; /tmp always
	// exists and build VMs are thrown away anyway.
	GuestLogPath = "/tmp/freeagent-vm.log"
)

// GuestJob is the LaunchAgent that runs the launcher when the guest's
// user logs in (the Tart base images log in automatically).
func GuestJob() Job {
	return Job{
		Label:            GuestLabel,
		ProgramArguments: []string{GuestLauncherPath},
		RunAtLoad:        true,
		// Relaunch only after a crash: a finished bootstrap exits on purpose,
		// and one restarted after a crash reports instead of building twice.
		KeepAlive:              &KeepAlive{Crashed: ptr(true)},
		LimitLoadToSessionType: "Aqua", // the logged-in session, where the build keychain works
		StandardOutPath:        GuestLogPath,
		StandardErrorPath:      GuestLogPath,
		EnvironmentVariables: map[string]string{
			// launchd's own PATH lacks Homebrew, where node, npm and pod live.
			"PATH": AgentPATH,
			// CocoaPods refuses to run without a UTF-8 locale.
			"LANG": "en_US.UTF-8",
		},
	}
}
