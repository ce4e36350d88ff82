//go:build !darwin

package vmbootstrap

// defaultLaunchctl is empty without launchd: a build user's commands have
// no session to enter.
const defaultLaunchctl = ""
