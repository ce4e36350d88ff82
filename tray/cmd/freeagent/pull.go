package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/tart"
)

// cmdPull pulls the remote VM template again. Builds never do (a moved tag
// would download tens of GB mid-build, and a registry outage would fail
// every build): following a tag is the owner's decision, made here.
func cmdPull(args []string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("pull", args, stderr)
	if err != nil {
		return err
	}
	if cfg.VMDriver != "tart" {
		return usageError{fmt.Errorf("--vm-driver %s has no template to pull", cfg.VMDriver)}
	}
	if !tart.IsRemote(cfg.Template) {
		fmt.Fprintf(stdout, "template %q is a local VM: nothing to pull (rebuild it with scripts/build-vm-template.sh)\n", cfg.Template)
		return nil
	}
	if _, err := cfg.tartPath(); err != nil {
		return fmt.Errorf("%w: install it (brew install cirruslabs/cli/tart) or name it with --tart", err)
	}
	log := logrus.New()
	log.SetOutput(stdout)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := cfg.tartDriver(log).PullTemplate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "template %s is up to date; builds from now on clone it\n", cfg.Template)
	return nil
}
