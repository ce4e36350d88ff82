package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

const statusHelp = `Shows a build: status, queue position, phase and progress, attempts, worker, times, error
and artifacts. With --watch it prints each change until the build ends and exits 0 when it
completed, 1 when it failed or was cancelled. With --json: the build object (with --watch,
one object per line at each change).`

func (a *App) cmdStatus(ctx context.Context, inv *invocation, args []string) error {
	return a.view(ctx, inv, args, false)
}

// view is build:view (eas: the id is optional, --json prints the build as
// eas-cli does) and its old name status.
func (a *App) view(ctx context.Context, inv *invocation, args []string, eas bool) error {
	fs := inv.flags()
	watch := fs.Bool("watch", false, "follow the build until it ends")
	inv.alias(fs, "w", "watch")
	minArgs := 1
	if eas {
		minArgs = 0 // the newest build
	}
	pos, err := inv.parse(fs, args, minArgs, 1)
	if err != nil {
		return err
	}
	s, err := inv.session()
	if err != nil {
		return err
	}
	id := ""
	if len(pos) == 1 {
		id = pos[0]
	} else if id, err = newestBuild(ctx, s); err != nil {
		return err
	}
	b, err := s.getBuild(ctx, id)
	if err != nil {
		return err
	}
	shown := func(b api.Build) any {
		if eas {
			return toEAS(b, s.baseURL)
		}
		return b
	}
	if inv.json {
		if err := inv.ui.emit(shown(b)); err != nil {
			return err
		}
	} else {
		printBuild(inv.ui, b, time.Now())
		if b.LogLength > 0 {
			if phases, err := a.buildPhases(ctx, s, b); err == nil {
				printPhases(inv.ui, phases, time.Now())
			} else {
				inv.ui.warn("cannot read the log's phases: %v", err)
			}
		}
	}
	if !*watch {
		if !inv.json {
			printNext(inv.ui, b)
		}
		return nil
	}
	last := watchKey(b)
	final, err := a.watchBuild(ctx, s, id, b, func(b api.Build) {
		if k := watchKey(b); k != last {
			last = k
			if inv.json {
				inv.ui.emit(shown(b)) //nolint:errcheck
			} else {
				inv.ui.printf("%s  %s\n", inv.ui.o(cDim, time.Now().Format("15:04:05")), statusLine(inv.ui, b))
			}
		}
	})
	if err != nil {
		return err
	}
	if !inv.json {
		printNext(inv.ui, final)
	}
	return endResult(final)
}

func (s *session) getBuild(ctx context.Context, id string) (api.Build, error) {
	var b api.Build
	err := s.withBuild(ctx, id, "get build "+id, true, func(ctx context.Context, c *api.Client) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		b, err = c.GetBuild(ctx, id)
		return err
	})
	return b, err
}

// watchBuild polls the build until it ends, calling change with each view.
func (a *App) watchBuild(ctx context.Context, s *session, id string, b api.Build, change func(api.Build)) (api.Build, error) {
	interval := a.PollInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	for !b.Status.Terminal() {
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(interval):
		}
		var err error
		if b, err = s.getBuild(ctx, id); err != nil {
			return b, err
		}
		change(b)
	}
	return b, nil
}

// endResult is nil for a completed build, else the error that exits 1.
func endResult(b api.Build) error {
	if b.Status == api.StatusCompleted {
		return nil
	}
	detail := ""
	if b.ErrorMessage != nil {
		detail = plainText(*b.ErrorMessage)
	}
	if b.ErrorCode != nil && *b.ErrorCode != "" {
		detail = strings.TrimSpace(detail + " [" + *b.ErrorCode + "]")
	}
	return &buildEnded{id: b.ID, status: b.Status, detail: detail}
}

func watchKey(b api.Build) string {
	k := fmt.Sprintf("%s|%s|%d|%v", b.Status, b.Phase, b.Attempts, b.CancelRequested)
	if b.QueuePosition != nil {
		k += fmt.Sprintf("|q%d", *b.QueuePosition)
	}
	if b.Progress != nil {
		k += fmt.Sprintf("|p%d", *b.Progress/10) // a line per 10 %
	}
	return k
}

func statusColor(s api.BuildStatus) string {
	switch s {
	case api.StatusCompleted:
		return cGreen
	case api.StatusFailed:
		return cRed
	case api.StatusCancelled:
		return cYellow
	case api.StatusBuilding, api.StatusAssigned:
		return cCyan
	}
	return ""
}

// statusLine is the one-line summary of a build's state.
func statusLine(u *ui, b api.Build) string {
	parts := []string{u.o(statusColor(b.Status)+cBold, string(b.Status))}
	if b.Status == api.StatusPending && b.QueuePosition != nil {
		parts = append(parts, fmt.Sprintf("position %d in the queue", *b.QueuePosition))
	}
	if b.Status == api.StatusPending && b.RunAfter != nil && time.Until(*b.RunAfter) > 0 {
		parts = append(parts, fmt.Sprintf("retrying after %s", b.RunAfter.Local().Format("15:04:05")))
	}
	if b.Phase != "" && b.Phase != string(b.Status) && !b.Status.Terminal() {
		ph := "phase " + b.Phase
		if b.Progress != nil {
			ph += fmt.Sprintf(" %d%%", *b.Progress)
		}
		parts = append(parts, ph)
	}
	if b.Attempts > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d of %d", b.Attempts, max(b.MaxAttempts, b.Attempts)))
	}
	if b.CancelRequested && !b.Status.Terminal() {
		parts = append(parts, "cancel requested")
	}
	if b.Status.Terminal() && b.ErrorMessage != nil && *b.ErrorMessage != "" {
		// One line: the log tail the worker appends is shown once, by the
		// command's final error or by `status`'s Error row.
		first, _, _ := strings.Cut(plainText(*b.ErrorMessage), "\n")
		parts = append(parts, first)
	}
	return strings.Join(parts, " · ")
}

func printBuild(u *ui, b api.Build, now time.Time) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	fmt.Fprintf(tw, "Build %s\n", u.o(cBold, b.ID))
	row("Status", statusLine(u, b))
	what := b.Platform
	if b.Profile != "" {
		what += " · profile " + b.Profile
	}
	row("Platform", fmt.Sprintf("%s · priority %d", what, b.Priority))
	if b.WorkerID != nil && *b.WorkerID != "" {
		row("Worker", *b.WorkerID)
	}
	if n := len(b.AttemptHistory); n > 0 && b.AttemptHistory[n-1].VM != nil {
		row("VM", b.AttemptHistory[n-1].VM.Describe())
	}
	row("Submitted", fmt.Sprintf("%s (%s)", b.SubmittedAt.Local().Format(time.DateTime), ago(b.SubmittedAt, now)))
	if b.StartedAt != nil {
		row("Started", b.StartedAt.Local().Format(time.DateTime))
	}
	if b.CompletedAt != nil {
		took := ""
		if b.StartedAt != nil {
			took = fmt.Sprintf(" (took %s)", b.CompletedAt.Sub(*b.StartedAt).Round(time.Second))
		}
		row("Ended", b.CompletedAt.Local().Format(time.DateTime)+took)
	}
	if b.ErrorMessage != nil || b.ErrorCode != nil {
		msg := ""
		if b.ErrorMessage != nil {
			msg = plainText(*b.ErrorMessage)
		}
		if b.ErrorCode != nil && *b.ErrorCode != "" {
			msg += " [" + *b.ErrorCode + "]"
		}
		row("Error", u.o(cRed, strings.TrimSpace(msg)))
	}
	if b.RetryOf != nil {
		row("Retry of", *b.RetryOf)
	}
	if sp := b.Spec; sp != nil {
		if sp.Message != "" {
			row("Message", sp.Message)
		}
		app := sp.App.Name + " (" + sp.App.Slug
		if sp.App.Version != "" {
			app += " " + sp.App.Version
		}
		if sp.Platform == api.PlatformAndroid && sp.App.AndroidPackage != "" {
			app += ", " + sp.App.AndroidPackage
		}
		row("App", app+")")
		row("Profile", fmt.Sprintf("%s · %s distribution · environment %s", sp.ProfileName, sp.Profile.Distribution, sp.Environment))
		if v := sp.Versions; v != nil {
			row("Version", fmt.Sprintf("%s · %s %s · %s version source", cmp.Or(b.AppVersion, "-"), api.BuildVersionName(sp.Platform), cmp.Or(b.BuildVersion, "-"), v.Source))
		}
		if sp.Android != nil {
			build := "gradlew " + sp.Android.GradleCommand
			if sp.Android.BuildType != "" {
				build += " (" + sp.Android.BuildType + ")"
			}
			row("Build", build)
		}
		row("Packages", describeProject(sp.Project))
		signing := sp.Credentials.Source
		if k := sp.Credentials.Android; k != nil {
			signing += fmt.Sprintf(" keystore, key %q, certificate SHA-256 %s", k.KeyAlias, k.CertificateSHA256)
		}
		row("Signing", signing)
		if len(sp.Profile.Env) > 0 {
			row("Env", strings.Join(slices.Sorted(maps.Keys(sp.Profile.Env)), ", "))
		}
	}
	for i, art := range b.Artifacts {
		k := ""
		if i == 0 {
			k = "Artifacts"
		}
		sum := art.SHA256
		if len(sum) > 16 {
			sum = sum[:16] + "…"
		}
		row(k, fmt.Sprintf("%s  %s  sha256 %s", art.Name, bytesize.SI(art.Size), sum))
	}
	if b.ArtifactsExpired || b.ArtifactsExpireAt != nil {
		row("Expiry", artifactsExpiry(b, time.Now()))
	}
	if b.InstallURL != nil {
		until := ""
		if b.InstallURLExpiresAt != nil {
			until = " (works until " + b.InstallURLExpiresAt.Local().Format(time.DateTime) + "; no login needed)"
		}
		row("Install", *b.InstallURL+until)
	}
	if len(b.AttemptHistory) > 1 || len(b.AttemptHistory) == 1 && b.AttemptHistory[0].ErrorMessage != nil {
		for i, at := range b.AttemptHistory {
			k := ""
			if i == 0 {
				k = "Attempts"
			}
			line := fmt.Sprintf("#%d %s on %s", at.Number, at.Status, at.WorkerID)
			if at.ErrorMessage != nil {
				line += ": " + plainText(*at.ErrorMessage)
			}
			row(k, line)
		}
	}
	tw.Flush()
	u.printf("%s", buf.String())
}

// printNext suggests the next commands for a build.
func printNext(u *ui, b api.Build) {
	var next []string
	switch {
	case b.Status == api.StatusCompleted && len(b.Artifacts) > 0:
		next = append(next, "expo-build build:download "+b.ID)
	case b.Status == api.StatusFailed || b.Status == api.StatusCancelled:
		next = append(next, "expo-build logs "+b.ID, "expo-build retry "+b.ID)
	case !b.Status.Terminal():
		next = append(next, "expo-build logs "+b.ID+" -f", "expo-build build:view "+b.ID+" --watch")
	}
	if len(next) > 0 {
		u.printf("%s %s\n", u.o(cDim, "Next:"), strings.Join(next, "   "))
	}
}

const listHelp = `Lists builds, newest first, one page at a time (--limit, default 20); the last line says
how to get the next page (--cursor). --all fetches every page. Needs a developer or admin
API key. With --json: {"builds": [...], "next_cursor": "..."}.`

func (a *App) cmdList(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	var o api.ListOptions
	all := fs.Bool("all", false, "fetch every page")
	fs.StringVar(&o.Status, "status", "", "only builds in `STATUS`: pending, assigned, building, completed, failed or cancelled")
	fs.StringVar(&o.Platform, "platform", "", "only `PLATFORM`: ios or android")
	fs.StringVar(&o.WorkerID, "worker", "", "only builds of this worker `ID`")
	fs.IntVar(&o.Limit, "limit", 20, "`N` builds per page, 1 to 200")
	fs.StringVar(&o.Cursor, "cursor", "", "start at `CURSOR` (printed after a page)")
	if _, err := inv.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if o.Limit < 1 || o.Limit > 200 {
		return usageErr("--limit must be between 1 and 200, got %d", o.Limit)
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	var out api.BuildList
	for {
		page, err := s.listBuilds(ctx, c, o)
		if err != nil {
			return err
		}
		out.Builds = append(out.Builds, page.Builds...)
		out.NextCursor = page.NextCursor
		if !*all || page.NextCursor == "" || len(out.Builds) >= 100000 {
			break
		}
		o.Cursor = page.NextCursor
	}
	if out.Builds == nil {
		out.Builds = []api.Build{}
	}
	if inv.json {
		return inv.ui.emit(out)
	}
	printBuildTable(inv.ui, out.Builds)
	if out.NextCursor != "" {
		inv.ui.printf("%s expo-build list --cursor %s%s\n", inv.ui.o(cDim, "More:"), out.NextCursor, listFilterArgs(o))
	}
	return nil
}

// printBuildTable prints builds as a table, one a line.
func printBuildTable(u *ui, builds []api.Build) {
	if len(builds) == 0 {
		u.printf("No builds.\n")
		return
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPLATFORM\tPROFILE\tVERSION\tPRIORITY\tATTEMPTS\tQUEUE\tSUBMITTED\tARTIFACTS UNTIL")
	now := time.Now()
	for _, b := range builds {
		q := "-"
		if b.QueuePosition != nil {
			q = fmt.Sprint(*b.QueuePosition)
		}
		profile := b.Profile
		if profile == "" {
			profile = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", b.ID, b.Status, b.Platform, profile, versionText(b),
			b.Priority, b.Attempts, q, ago(b.SubmittedAt, now), listExpiry(b))
	}
	tw.Flush()
	// Colour the status column after alignment (escape codes would count
	// as width).
	lines := strings.SplitAfter(buf.String(), "\n")
	col := strings.Index(lines[0], "STATUS")
	for i, b := range builds {
		if l := lines[i+1]; col >= 0 && len(l) >= col+len(b.Status) {
			lines[i+1] = l[:col] + u.o(statusColor(b.Status), string(b.Status)) + l[col+len(b.Status):]
		}
	}
	u.printf("%s", strings.Join(lines, ""))
}

// listBuilds reads one page of builds, retrying network errors.
func (s *session) listBuilds(ctx context.Context, c *api.Client, o api.ListOptions) (api.BuildList, error) {
	var page api.BuildList
	err := s.retry(ctx, "list builds", true, func(ctx context.Context) error {
		var err error
		page, err = c.ListBuilds(ctx, o)
		return err
	})
	if err != nil {
		return page, wrapOp("list builds", err)
	}
	return page, nil
}

func listFilterArgs(o api.ListOptions) string {
	var b strings.Builder
	for _, kv := range [][2]string{{"status", o.Status}, {"platform", o.Platform}, {"worker", o.WorkerID}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " --%s %s", kv[0], kv[1])
		}
	}
	if o.Limit != 20 {
		fmt.Fprintf(&b, " --limit %d", o.Limit)
	}
	return b.String()
}

const cancelHelp = `Cancels a build. A pending build is cancelled at once; a running one is stopped by its
worker within moments (expo-build build:view <id> --watch shows when). A cancel that reaches the
controller before the worker reports the result wins; a build that already completed or
failed cannot be cancelled, and the command says so and exits 1.`

func (a *App) cmdCancel(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	s, id, err := inv.buildArg(fs, args)
	if err != nil {
		return err
	}
	return a.cancelBuild(ctx, inv, s, id)
}

func (a *App) cancelBuild(ctx context.Context, inv *invocation, s *session, id string) error {
	var resp api.CancelResponse
	err := s.withBuild(ctx, id, "cancel build "+id, true, func(ctx context.Context, c *api.Client) error {
		var err error
		resp, err = c.Cancel(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	if inv.json {
		return inv.ui.emit(resp)
	}
	switch {
	case resp.Status == api.StatusCancelled:
		inv.ui.printf("Build %s cancelled.\n", id)
	case resp.Status.Terminal():
		inv.ui.printf("Build %s had already ended (%s); nothing to cancel.\n", id, resp.Status)
	default:
		inv.ui.printf("Cancel requested: the worker is told at once and stops build %s.\n%s expo-build build:view %s --watch\n", id, inv.ui.o(cDim, "Next:"), id)
	}
	return nil
}

const retryHelp = `Queues a new build with the same source and settings as a finished one (failed, cancelled
or completed) and prints its id. Signing certificates are deleted when a build ends: to
retry a signed iOS build once they are gone, pass them again (--p12 with --provisioning-profile, or
--certs).`

func (a *App) cmdRetry(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	var sign signing
	fs.StringVar(&sign.p12, "p12", "", "iOS signing certificate `FILE` (.p12); password from EXPO_P12_PASSWORD or a prompt")
	fs.Var(&sign.profiles, "provisioning-profile", "provisioning profile `FILE` (.mobileprovision; repeatable)")
	fs.StringVar(&sign.certsZip, "certs", "", "prepared certs `ZIP` (one .p12, password.txt, *.mobileprovision)")
	pos, err := inv.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := sign.check(""); err != nil {
		return err
	}
	s, err := inv.session()
	if err != nil {
		return err
	}
	id := pos[0]
	certs, err := a.certsZip(&sign)
	if err != nil {
		return err
	}
	var sub api.SubmitResponse
	// Not idempotent: only errors from before the request left are retried.
	err = s.withBuild(ctx, id, "retry build "+id, false, func(ctx context.Context, c *api.Client) error {
		var err error
		if certs == nil {
			sub, err = c.Retry(ctx, id)
		} else {
			sub, err = retryWithCerts(ctx, c, id, certs)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := s.saveToken(sub.ID, sub.AccessToken, "", sub.SubmittedAt); err != nil {
		inv.ui.warn("%v", err)
	}
	if inv.json {
		return inv.ui.emit(map[string]any{"id": sub.ID, "status": sub.Status, "queue_position": sub.QueuePosition,
			"submitted_at": sub.SubmittedAt, "retry_of": id})
	}
	inv.ui.printf("%s Build %s queued as a retry of %s", inv.ui.o(cGreen, "✔"), inv.ui.o(cBold, sub.ID), id)
	if sub.QueuePosition != nil {
		inv.ui.printf(" (position %d in the queue)", *sub.QueuePosition)
	}
	inv.ui.printf("\n  Follow it:   expo-build build:view %s --watch\n  Live logs:   expo-build logs %s -f\n", sub.ID, sub.ID)
	return nil
}

// retryWithCerts is POST /api/builds/:id/retry with a multipart "certs" file.
// api.Client has no method for it (see the README, "Controller API
// requests"); the request goes through the client's Do with its credentials.
func retryWithCerts(ctx context.Context, c *api.Client, id string, certs []byte) (api.SubmitResponse, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, err := mw.CreateFormFile("certs", "certs.zip")
	if err != nil {
		return api.SubmitResponse{}, err
	}
	w.Write(certs) //nolint:errcheck // a bytes.Buffer
	mw.Close()
	resp, err := rawRequest(ctx, c, http.MethodPost, "/api/builds/"+url.PathEscape(id)+"/retry", &body,
		map[string]string{"Content-Type": mw.FormDataContentType()})
	if err != nil {
		return api.SubmitResponse{}, err
	}
	defer resp.Body.Close()
	var out api.SubmitResponse
	if err := api.DecodeAnswer(resp.Body, &out); err != nil {
		return out, fmt.Errorf("decode the retry answer: %w", err)
	}
	return out, nil
}

// rawRequest sends a request the typed client has no method for, with the
// client's credentials, through the client's Do (which turns non-2xx answers
// into *api.Error).
func rawRequest(ctx context.Context, c *api.Client, method, path string, body io.Reader, h map[string]string) (*http.Response, error) {
	req, err := c.NewRequest(ctx, method, path, body, h)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

const workersHelp = `Lists the registered workers: status, platforms, running builds, counts and last contact.
A paused worker (by an admin, its owner or its host's rules; it takes no new builds) and one that needs attention are marked, with why
and how to undo it. Needs an admin API key. With --json: the controller's {"workers": [...]}.`

func (a *App) cmdWorkers(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	if _, err := inv.parse(fs, args, 0, 0); err != nil {
		return err
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	var list api.WorkerList
	err = s.retry(ctx, "list workers", true, func(ctx context.Context) error {
		var err error
		list, err = c.ListWorkers(ctx)
		return err
	})
	if api.StatusOf(err) == http.StatusForbidden {
		return &cliError{code: ExitAuth, msg: "list workers: this API key is not an admin key (403)", err: nil,
			hint: "workers needs an admin key: `expo-build config --api-key-stdin` or EXPO_CONTROLLER_API_KEY"}
	}
	if err != nil {
		return wrapOp("list workers", err)
	}
	if inv.json {
		return inv.ui.emit(list)
	}
	if len(list.Workers) == 0 {
		inv.ui.printf("No workers registered.\n")
		return nil
	}
	inv.ui.printf("%s", workersTable(list.Workers, time.Now()))
	return nil
}

// workersTable is the workers list for people: a worker paused by an
// admin, by its owner or by its host's rules reads as paused (whatever its
// connection) and one that needs attention says so,
// each with why and what to do below the table.
func workersTable(workers []api.Worker, now time.Time) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSTATUS\tPLATFORMS\tRUNNING\tDONE\tFAILED\tLAST SEEN")
	var notes []string
	for _, w := range workers {
		status := w.Status
		w.Summarize() // a controller older than the pause kinds sends only Paused
		switch w.PauseKind {
		case api.PauseAdmin:
			status = "paused (" + w.Status + ")"
			notes = append(notes, fmt.Sprintf("%s (%s) is paused by an admin: it finishes the builds it runs and takes no new ones; "+
				"resume it from the dashboard's Workers page or with POST /api/workers/%s/resume", w.Name, w.ID, w.ID))
		case api.PauseOwner:
			status = "paused (" + w.Status + ")"
			notes = append(notes, fmt.Sprintf("%s (%s) is paused by the Mac's owner (Accept Builds is off in its menu bar); "+
				"it takes builds again when they turn it back on", w.Name, w.ID))
		case api.PauseHost:
			status = "paused: " + w.PauseReason + " (" + w.Status + ")"
			notes = append(notes, fmt.Sprintf("%s (%s) is holding builds back by its owner's rules: %s; "+
				"it takes builds again by itself when that changes", w.Name, w.ID, w.PauseReason))
		}
		if w.NeedsAttention {
			status += ", needs attention"
			notes = append(notes, fmt.Sprintf("%s (%s) needs attention: %s; check the machine, then acknowledge it from the dashboard or with POST /api/workers/%s/acknowledge",
				w.Name, w.ID, cmp.Or(w.AttentionReason, "no reason recorded"), w.ID))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", w.Name, w.ID, status, strings.Join(w.Capabilities.Platforms, ","),
			len(w.ActiveBuilds), w.Capabilities.MaxConcurrentBuilds, w.BuildsCompleted, w.BuildsFailed, ago(w.LastSeenAt, now))
	}
	tw.Flush()
	if len(notes) > 0 {
		buf.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return buf.String()
}

// artifactsExpiry says when an ended build's artifacts are deleted
// (--retain-artifacts on the controller), or that they were.
func artifactsExpiry(b api.Build, now time.Time) string {
	switch {
	case b.ArtifactsExpired && b.ArtifactsExpireAt != nil:
		return "artifacts expired " + b.ArtifactsExpireAt.Local().Format(time.DateOnly)
	case b.ArtifactsExpired:
		return "artifacts expired"
	case b.ArtifactsExpireAt == nil:
		return "-"
	}
	left := b.ArtifactsExpireAt.Sub(now)
	in := fmt.Sprintf("in %dd", int(left.Hours()/24))
	if left < 48*time.Hour {
		in = fmt.Sprintf("in %dh", max(0, int(left.Hours())))
	}
	return "artifacts expire " + b.ArtifactsExpireAt.Local().Format(time.DateOnly) + " (" + in + ")"
}

// listExpiry is artifactsExpiry for a column of the builds table.
func listExpiry(b api.Build) string {
	switch {
	case b.ArtifactsExpired:
		return "expired"
	case b.ArtifactsExpireAt == nil:
		return "-"
	}
	return b.ArtifactsExpireAt.Local().Format(time.DateOnly)
}

// versionText is a build's "app version (build version)", as the list
// shows it.
func versionText(b api.Build) string {
	switch {
	case b.BuildVersion != "":
		return cmp.Or(b.AppVersion, "?") + " (" + b.BuildVersion + ")"
	case b.AppVersion != "":
		return b.AppVersion
	}
	return "-"
}
