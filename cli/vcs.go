package cli

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/cli/easjson"
)

// checkRequireCommit refuses, as eas-cli does, to build a project whose
// eas.json sets cli.requireCommit while its git working tree has
// uncommitted changes or untracked files (git status, untracked files
// shown), listing them. eas-cli offers to commit them on a terminal;
// expo-build never commits for the developer.
func checkRequireCommit(ctx context.Context, appRoot string) error {
	f, err := easjson.Load(appRoot)
	if errors.Is(err, easjson.ErrMissing) {
		return nil
	}
	if err != nil {
		return &cliError{code: ExitUsage, msg: "eas.json", err: err}
	}
	if !f.RequireCommit() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", appRoot, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exit.Stderr)))
		}
		return &cliError{code: ExitUsage, msg: "eas.json sets cli.requireCommit, which needs the project in a git repository", err: err,
			hint: "run `git init` and commit the project, or remove cli.requireCommit from eas.json"}
	}
	if status := strings.TrimRight(string(out), "\n"); status != "" {
		return &cliError{code: ExitUsage,
			msg:  "Your repository working tree is dirty: eas.json sets cli.requireCommit, so the build needs a clean working tree. The following files need to be committed:\n" + status,
			hint: "Commit all changes (git add -A && git commit), then build again; nothing was uploaded"}
	}
	return nil
}
