//go:build darwin && cgo

#import <AppKit/AppKit.h>
#include <stdint.h>
#include "_cgo_export.h"

// freeagentObservePowerOff calls back into Go (freeagentWillPowerOff) when
// macOS announces a logout, restart or shutdown. The observer is retained
// for the process's life (manual reference counting: no ARC here).
void freeagentObservePowerOff(uintptr_t handle) {
	id observer = [[[NSWorkspace sharedWorkspace] notificationCenter]
		addObserverForName:NSWorkspaceWillPowerOffNotification
		            object:nil
		             queue:nil
		        usingBlock:^(NSNotification *note) {
			freeagentWillPowerOff(handle);
		}];
	[observer retain];
}
