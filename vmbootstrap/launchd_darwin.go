package vmbootstrap

// defaultLaunchctl starts the build user's commands in its own launchd
// session (see builduser.go).
const defaultLaunchctl = "/bin/launchctl"
