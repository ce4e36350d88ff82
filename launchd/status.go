package launchd

// Status is the state of the host LaunchAgent.
type Status int

// The states Status reports.
const (
	NotInstalled Status = iota
	Stopped             // installed (loaded at next login), no process now
	Running
)

func (s Status) String() string {
	switch s {
	case Running:
		return "installed, running"
	case Stopped:
		return "installed, not running"
	}
	return "not installed"
}
