//go:build darwin && cgo

package menubar

/*
#cgo LDFLAGS: -framework AppKit
#include <stdint.h>
void freeagentObservePowerOff(uintptr_t handle);
*/
import "C"

import "runtime/cgo"

// observePowerOff calls f when macOS announces a logout, restart or
// shutdown (NSWorkspaceWillPowerOffNotification), on the main thread: f
// must not block. The observer lasts as long as the process.
func observePowerOff(f func()) {
	C.freeagentObservePowerOff(C.uintptr_t(cgo.NewHandle(f)))
}

//export freeagentWillPowerOff
func freeagentWillPowerOff(handle C.uintptr_t) {
	cgo.Handle(handle).Value().(func())()
}
