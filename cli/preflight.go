package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/pack"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// The checks here run before anything is sent: a mistake the build would
// only find on the worker, minutes and an upload later, is refused on the
// developer's machine with the fix named.

// maxPackageJSON bounds the package.json read to check it.
const maxPackageJSON = 4 << 20

// checkProject refuses, before the controller is asked anything, an app
// whose build could not even start: the default pipeline installs the
// dependencies package.json lists and runs Expo's prebuild, so the app's
// root needs one, holding a JSON object. (The app config itself is what
// findProject looked for to find the root.)
func checkProject(root string) error {
	name := filepath.Join(root, "package.json")
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &cliError{code: ExitUsage, msg: fmt.Sprintf("%s has no package.json: the build installs the app's dependencies from it (expo, react-native, …)", root),
			hint: "add one: `npm init -y && npx expo install expo react-native` in " + root + " (or start from `npx create-expo-app`), then submit again"}
	}
	if err != nil {
		return &cliError{code: ExitUsage, msg: "read package.json", err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return usageErr("%s is not a regular file: the build reads the app's dependencies from it", name)
	} else if st.Size() > maxPackageJSON {
		return usageErr("%s is %s: a package.json is a few kilobytes; check the file", name, bytesize.SI(st.Size()))
	}
	var pkg map[string]any
	if err := json.NewDecoder(f).Decode(&pkg); err != nil || pkg == nil {
		why := "it is not a JSON object"
		if err != nil {
			why = err.Error()
		}
		return &cliError{code: ExitUsage, msg: fmt.Sprintf("%s is not valid JSON: %s", name, why),
			hint: "fix it (`npm pkg get name` shows where npm stumbles), then submit again"}
	}
	return nil
}

// controllerLimits asks the controller what it accepts, which also proves
// the API key and the URL before anything is packed. A controller too old
// to answer (404) has its key checked with a list of builds instead, and
// the size check is left to it.
func controllerLimits(ctx context.Context, s *session, c *api.Client) (api.Limits, error) {
	var l api.Limits
	err := s.retry(ctx, "check the API key", true, func(ctx context.Context) error {
		var err error
		l, err = c.Limits(ctx)
		return err
	})
	if api.StatusOf(err) == http.StatusNotFound {
		err = s.retry(ctx, "check the API key", true, func(ctx context.Context) error {
			_, err := c.ListBuilds(ctx, api.ListOptions{Limit: 1})
			return err
		})
	}
	if err != nil {
		return api.Limits{}, wrapOp("check the API key", err)
	}
	return l, nil
}

// largestShown is how many of the largest files a size refusal lists.
const largestShown = 5

// checkUpload refuses, before a byte is sent, a project the controller
// would refuse after the upload: the files that would be packed add up to
// more than its limit (it bounds the archive both as sent and as it
// expands). The message gives the total, the limit, the setting that
// raises it and the largest files, where the stray video or the
// forgotten build output usually is. limit 0 (unknown) checks nothing.
func checkUpload(plan *pack.Plan, limit int64) error {
	if limit <= 0 || plan.Bytes <= limit {
		return nil
	}
	files := make([]pack.Entry, 0, len(plan.Entries))
	for _, e := range plan.Entries {
		if e.Kind == pack.KindFile {
			files = append(files, e)
		}
	}
	slices.SortFunc(files, func(a, b pack.Entry) int { return cmp.Or(cmp.Compare(b.Size, a.Size), strings.Compare(a.Rel, b.Rel)) })
	files = files[:min(len(files), largestShown)]
	var b strings.Builder
	if big := files[0]; big.Size > limit {
		fmt.Fprintf(&b, "%s alone is %s, more than the controller accepts (%s, %d bytes): nothing was uploaded", big.Rel, bytesize.SI(big.Size), bytesize.SI(limit), limit)
	} else {
		fmt.Fprintf(&b, "the project is %s in %d files, more than the controller accepts (%s, %d bytes): nothing was uploaded", bytesize.SI(plan.Bytes), plan.Files, bytesize.SI(limit), limit)
	}
	b.WriteString("\n  The largest files:")
	for _, f := range files {
		fmt.Fprintf(&b, "\n    %10s  %s", bytesize.SI(f.Size), f.Rel)
	}
	ignoreFile := cmp.Or(plan.IgnoreFile, ".easignore")
	return &cliError{code: ExitUsage, msg: b.String(),
		hint: fmt.Sprintf("leave what the build does not need out with %s in %s (e.g. a line \"/%s\"), or ask the farm's admin to raise the controller's --max-source-bytes",
			ignoreFile, plan.Root, files[0].Rel)}
}
