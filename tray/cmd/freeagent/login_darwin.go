package main

import (
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/launchd"
	"github.com/freeagent-build/freeagent/tray/menubar"
)

// loginItem is the menu's "Start at Login": the app's LaunchAgent.
func loginItem(log logrus.FieldLogger) menubar.LoginItem {
	agent, err := launchd.CurrentApp(appCommand)
	if err != nil {
		log.WithError(err).Warn("start at login is unavailable")
		return nil
	}
	return agent
}
