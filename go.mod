module github.com/freeagent-build/freeagent

go 1.26

require (
	fyne.io/systray v1.12.2
	github.com/godbus/dbus/v5 v5.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/keybase/go-keychain v0.0.1
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/sys v0.15.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
