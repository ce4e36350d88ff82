// Package menu is the menu bar's content as plain data: from the agent's
// status, the host checks and the app's settings it builds the items the
// menu shows. It knows nothing of the menu-bar library, so every state is
// unit-tested here; the binding in package menubar only draws the items.
package menu

import (
	"fmt"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// Item ids: the binding reports clicks by id.
const (
	IDStatus      = "status"
	IDFix         = "fix" // clickable when Preferences is the fix
	IDAccept      = "accept"
	IDStopNow     = "stop-now"
	IDDashboard   = "dashboard"
	IDLogs        = "logs"
	IDPreferences = "preferences"
	IDLogin       = "login"
	IDDiagnostics = "diagnostics"
	IDQuit        = "quit"
	buildPrefix   = "build:"
)

// Item is one menu entry. Every top-level item is always present, in the
// same order (Hidden when it does not apply), so a binding can create the
// entries once; only the status line's children (the running builds) vary.
type Item struct {
	ID        string
	Title     string
	Tooltip   string
	Enabled   bool
	Checkable bool
	Checked   bool
	Hidden    bool
	Separator bool // a divider line; other fields unused
	Children  []Item
}

// Input is everything the menu depends on.
type Input struct {
	Configured    bool   // a controller URL and an API key are set
	ControllerURL string // for "Open dashboard"
	Status        agent.Status
	Checks        []hostcheck.Result // the latest host checks
	Quitting      bool               // Quit was chosen; the agent drains
	LoginItem     bool               // "Start at login" is on
	LoginItemErr  error              // its state could not be read
	Now           time.Time
}

// Build returns the menu for in.
func Build(in Input) []Item {
	status, fix := statusLine(in)
	status.Children = buildItems(in)
	accepting := !ownerPaused(in.Status)
	running := len(in.Status.Builds)
	quit := Item{ID: IDQuit, Title: "Quit", Enabled: true,
		Tooltip: "stop taking builds, let running builds finish, then quit"}
	if in.Quitting && running > 0 {
		quit.Title = "Quit Now (hand back running builds)"
		quit.Tooltip = "stop the running builds; the controller gives them to another worker"
	}
	login := Item{ID: IDLogin, Title: "Start at Login", Checkable: true, Checked: in.LoginItem, Enabled: in.LoginItemErr == nil}
	if in.LoginItemErr != nil {
		login.Tooltip = in.LoginItemErr.Error()
	}
	canAccept := in.Configured && !in.Quitting && in.Status.State != agent.StateDraining && in.Status.State != agent.StateStopped
	return []Item{
		status,
		fix,
		{Separator: true},
		{ID: IDAccept, Title: "Accept Builds", Checkable: true, Checked: accepting && canAccept, Enabled: canAccept,
			Tooltip: "untick to pause: running builds finish, no new ones start"},
		// While paused, running builds finish; this hands them back now
		// instead, without costing them an attempt.
		{ID: IDStopNow, Title: "Stop Running Builds Now", Enabled: true, Hidden: in.Status.State != agent.StatePaused || running == 0 || in.Quitting,
			Tooltip: "the controller gives them to another worker; they lose nothing"},
		{Separator: true},
		{ID: IDDashboard, Title: "Open Dashboard", Enabled: in.ControllerURL != "", Tooltip: in.ControllerURL},
		{ID: IDLogs, Title: "Open Logs", Enabled: true},
		{ID: IDPreferences, Title: "Preferences…", Enabled: true},
		login,
		{ID: IDDiagnostics, Title: "Run Diagnostics", Enabled: true, Tooltip: "check Tart, the template, disk space, the VM limit and the controller"},
		{Separator: true},
		quit,
	}
}

// statusLine is the first line, which tells the truth at a glance, and the
// fix line under it (hidden unless something needs attention).
func statusLine(in Input) (status, fix Item) {
	st := in.Status
	status = Item{ID: IDStatus}
	fix = Item{ID: IDFix, Hidden: true}
	running := len(st.Builds)
	failed := hostcheck.Failed(in.Checks)
	switch {
	case !in.Configured:
		status.Title = "Needs Setup: enter the controller and API key"
		fix.Title, fix.Hidden, fix.Enabled = "Open Preferences… to set them up", false, true
	case in.Quitting || st.State == agent.StateDraining:
		status.Title = "Draining: no new builds"
		if running > 0 {
			status.Title = fmt.Sprintf("Draining: finishing %s", plural(running, "build"))
		}
	case st.State == agent.StateStopped:
		status.Title = "Stopped"
	case len(failed) > 0:
		status.Title = "Needs Attention: " + failed[0].Message
		status.Tooltip = joinMessages(failed)
		fix.Title, fix.Hidden = "Fix: "+failed[0].Fix, false
		// Settings problems are fixed in Preferences: the line opens it.
		fix.Enabled = failed[0].ID == hostcheck.IDController || failed[0].ID == hostcheck.IDCredentials
	case st.State == agent.StateNeedsAttention:
		// Reasons read "what is wrong: the fix"; the fix follows the last colon.
		msg := st.Reason
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = st.Reason[:i]
			fix.Title, fix.Hidden, fix.Enabled = "Fix: "+st.Reason[i+2:], false, true // the key or URL: Preferences
		}
		status.Title = "Needs Attention: " + msg
	case st.State == agent.StateOffline:
		status.Title = "Offline: " + st.Reason
	case st.State == agent.StateConnecting || st.State == "":
		status.Title = "Connecting to the controller…"
	case st.State == agent.StatePaused:
		status.Title = "Paused: not accepting builds"
		if !ownerPaused(st) {
			status.Title = "Paused: " + st.HostPause
			status.Tooltip = "builds start again by themselves when this clears; the rules are in Preferences…"
		}
		if running > 0 {
			status.Title += fmt.Sprintf(" (%s finishing)", plural(running, "build"))
		}
	case running == 1:
		b := st.Builds[0]
		status.Title = fmt.Sprintf("Building %s · %s · %s", shortID(b.ID), phase(b), Elapsed(in.Now.Sub(b.StartedAt)))
	case running > 1:
		status.Title = fmt.Sprintf("Building %s", plural(running, "build"))
	default:
		status.Title = "Online, Idle"
		if sp := st.Spare; sp.State != "" {
			status.Title += " · spare VM " + sp.State
			if sp.State == agent.SpareFailed {
				status.Tooltip = "no warm spare: " + sp.Reason
			}
		}
		if c := st.Cache; c != nil && c.Hits+c.Misses > 0 {
			status.Title += fmt.Sprintf(" · cache %s, %.0f%% warm", bytesize.IEC(c.Bytes), 100*c.HitRate())
		}
	}
	// A menu line stays short; the tooltip keeps the whole text.
	if r := []rune(status.Title); len(r) > maxTitle {
		if status.Tooltip == "" {
			status.Tooltip = status.Title
		}
		status.Title = string(r[:maxTitle-1]) + "…"
	}
	if r := []rune(fix.Title); len(r) > maxTitle {
		fix.Tooltip, fix.Title = fix.Title, string(r[:maxTitle-1])+"…"
	}
	if st.WorkerID != "" && status.Tooltip == "" {
		status.Tooltip = "worker " + st.WorkerID
		if st.Cache != nil {
			status.Tooltip += "\ndependency caches: " + cache.Summary(*st.Cache, 0)
		}
		if sp := st.Spare; sp.Hits+sp.Misses > 0 {
			status.Tooltip += fmt.Sprintf("\nwarm spares: %d of %d builds started on one", sp.Hits, sp.Hits+sp.Misses)
		}
	}
	return status, fix
}

// ownerPaused: the owner unticked Accept Builds (a pause that is not the
// host's rules is the owner's).
func ownerPaused(st agent.Status) bool {
	return st.OwnerPaused || (st.State == agent.StatePaused && st.HostPause == "")
}

// maxTitle is the longest menu line, in characters.
const maxTitle = 80

// buildItems is one entry per running build, oldest first.
func buildItems(in Input) []Item {
	var items []Item
	for _, b := range in.Status.Builds {
		title := fmt.Sprintf("%s · %s · %s", shortID(b.ID), phase(b), Elapsed(in.Now.Sub(b.StartedAt)))
		if b.Platform != "" {
			title = fmt.Sprintf("%s (%s) · %s · %s", shortID(b.ID), b.Platform, phase(b), Elapsed(in.Now.Sub(b.StartedAt)))
		}
		items = append(items, Item{ID: buildPrefix + b.ID, Title: title, Tooltip: "build " + b.ID, Enabled: true})
	}
	return items
}

func phase(b agent.BuildStatus) string {
	p := b.Phase
	if p == "" {
		p = "starting"
	}
	if b.Progress > 0 {
		p += fmt.Sprintf(" %d%%", b.Progress)
	}
	return p
}

// shortID keeps ids readable in a menu; the tooltip has the full id.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

// Elapsed formats a build's running time as the menu shows it: 42s, 3m05s, 1h02m.
func Elapsed(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func joinMessages(rs []hostcheck.Result) string {
	var lines []string
	for _, r := range rs {
		lines = append(lines, r.Message+" — "+r.Fix)
	}
	return strings.Join(lines, "\n")
}
