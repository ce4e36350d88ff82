//go:build !darwin

package main

import (
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/tray/menubar"
)

// loginItem: starting at login is a macOS LaunchAgent; elsewhere the menu
// greys the item out.
func loginItem(logrus.FieldLogger) menubar.LoginItem { return nil }
