//go:build (darwin && cgo) || linux

package menubar

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"fyne.io/systray"

	"github.com/freeagent-build/freeagent/tray/menu"
)

// icon is the menu-bar icon: black on transparent, so macOS can draw it as
// a template image in light and dark menu bars.
//
//go:embed icon.png
var icon []byte

// Show puts the app in the menu bar and runs it until Quit has drained the
// worker. It must be called on the main goroutine (macOS runs the menu on
// the main thread). atExit (nil: none) runs last, also when macOS ends the
// app: the process then exits without returning from Show.
func Show(ctx context.Context, app *App, atExit func()) error {
	if err := checkDesktop(); err != nil {
		return err
	}
	errc := make(chan error, 1)
	systray.Run(func() {
		// A logout, restart or shutdown: start handing the running builds
		// back now; applicationWillTerminate (below) waits for it.
		observePowerOff(func() { go app.EndNow() })
		systray.SetTemplateIcon(icon, icon)
		systray.SetTooltip("Free Agent")
		b := &binding{app: app, stop: make(chan struct{})}
		b.create(app.Menu())
		go func() {
			defer b.wg.Wait()
			b.wg.Go(b.loop)
			err := app.Run(ctx)
			close(b.stop)
			errc <- err
			systray.Quit()
		}()
	}, func() {
		// applicationWillTerminate: macOS is ending the app (Quit from the
		// Dock or Activity Monitor, a logout) and the process exits as soon
		// as this returns. After our own Quit, Run has ended and this
		// returns at once.
		app.EndNow()
		if atExit != nil {
			atExit()
		}
	})
	return <-errc
}

// binding keeps the systray items in step with the menu model. systray
// items cannot be reordered or removed portably, so every top-level item
// exists from the start and is hidden when it does not apply; the running
// builds reuse a pool of submenu items.
type binding struct {
	app     *App
	stop    chan struct{}
	wg      sync.WaitGroup
	entries []*entry // top-level, in model order; nil for separators
}

type entry struct {
	mi       *systray.MenuItem
	shown    menu.Item
	children []*entry
}

func (b *binding) create(items []menu.Item) {
	for _, it := range items {
		if it.Separator {
			systray.AddSeparator()
			b.entries = append(b.entries, nil)
			continue
		}
		var mi *systray.MenuItem
		if it.Checkable {
			mi = systray.AddMenuItemCheckbox(it.Title, it.Tooltip, it.Checked)
		} else {
			mi = systray.AddMenuItem(it.Title, it.Tooltip)
		}
		e := &entry{mi: mi, shown: menu.Item{Title: it.Title, Tooltip: it.Tooltip, Checked: it.Checked, Enabled: true}}
		e.apply(it)
		b.entries = append(b.entries, e)
		b.listen(mi, it.ID)
	}
}

// listen forwards the item's clicks to the app until the app stops.
func (b *binding) listen(mi *systray.MenuItem, id string) {
	b.wg.Go(func() {
		for {
			select {
			case <-mi.ClickedCh:
				b.app.Click(id)
			case <-b.stop:
				return
			}
		}
	})
}

// loop redraws every second (elapsed times) and at once after a change.
func (b *binding) loop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.app.Changed():
		}
		b.update(b.app.Menu())
	}
}

func (b *binding) update(items []menu.Item) {
	for i, it := range items {
		if i >= len(b.entries) || b.entries[i] == nil {
			continue
		}
		e := b.entries[i]
		e.apply(it)
		for j, child := range it.Children {
			if j == len(e.children) {
				mi := e.mi.AddSubMenuItem(child.Title, child.Tooltip)
				c := &entry{mi: mi, shown: menu.Item{Title: child.Title, Tooltip: child.Tooltip, Enabled: true}}
				e.children = append(e.children, c) // informational: their clicks do nothing
			}
			e.children[j].apply(child)
		}
		for _, c := range e.children[len(it.Children):] {
			c.apply(menu.Item{ID: c.shown.ID, Title: c.shown.Title, Hidden: true})
		}
	}
}

// apply changes only what differs: every systray setter re-announces the
// menu to the desktop.
func (e *entry) apply(it menu.Item) {
	old := e.shown
	if it.Title != old.Title {
		e.mi.SetTitle(it.Title)
	}
	if it.Tooltip != old.Tooltip {
		e.mi.SetTooltip(it.Tooltip)
	}
	if it.Enabled != old.Enabled {
		if it.Enabled {
			e.mi.Enable()
		} else {
			e.mi.Disable()
		}
	}
	if it.Checkable && it.Checked != old.Checked {
		if it.Checked {
			e.mi.Check()
		} else {
			e.mi.Uncheck()
		}
	}
	if it.Hidden != old.Hidden {
		if it.Hidden {
			e.mi.Hide()
		} else {
			e.mi.Show()
		}
	}
	e.shown = it
}
