// Command expo-build is the developers' command line of Free Agent: submit
// an Expo project to your controller, follow the build, fetch the artifacts.
// See cli/README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/freeagent-build/freeagent/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.New().Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
