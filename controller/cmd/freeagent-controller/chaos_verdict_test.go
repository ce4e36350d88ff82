package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// chaosLedger is what the agents were told the controller accepted; the
// verdict holds the farm's records against it.
type chaosLedger struct {
	mu       sync.Mutex
	claims   map[string]attemptClaim // attempt → its claim
	accepts  map[string]acceptedCall // attempt → the last call the controller accepted of it
	uploads  map[string][]string     // attempt → the artifacts it uploaded
	lines    map[string]int          // attempt → log lines acknowledged (lines 0 to n-1)
	results  map[string][]string     // build → the attempts whose result the controller accepted
	consumed map[string]bool         // builds an agent fault already cost an attempt
	faults   [agentFaultKinds]int
	// duplicates seen as they happened: an attempt handed to two agents,
	// a repeated result taken as a new one.
	duplicates []finding
}

type attemptClaim struct {
	build, agent string
	at           time.Time // when the claim's answer arrived (the first time, if redelivered)
}

// acceptedCall is a call the controller accepted: what and when it was sent.
type acceptedCall struct {
	what string
	sent time.Time
}

type finding struct{ build, what string }

func newChaosLedger() *chaosLedger {
	return &chaosLedger{claims: map[string]attemptClaim{}, accepts: map[string]acceptedCall{}, uploads: map[string][]string{},
		lines: map[string]int{}, results: map[string][]string{}, consumed: map[string]bool{}}
}

func (l *chaosLedger) claimed(j *api.Job, agent string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.claims[j.AttemptID]
	switch {
	case !ok:
		l.claims[j.AttemptID] = attemptClaim{build: j.ID, agent: agent, at: now}
	case c.agent != agent || c.build != j.ID:
		l.duplicates = append(l.duplicates, finding{j.ID, fmt.Sprintf("attempt %s was handed to %s (build %s) and to %s (build %s)",
			j.AttemptID, c.agent, c.build, agent, j.ID)})
	}
	// The same attempt again to the same agent is a redelivery: the
	// answer of its claim was lost.
}

func (l *chaosLedger) accepted(attemptID, what string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.After(l.accepts[attemptID].sent) {
		l.accepts[attemptID] = acceptedCall{what, sent}
	}
}

func (l *chaosLedger) uploaded(attemptID, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.uploads[attemptID], name) {
		l.uploads[attemptID] = append(l.uploads[attemptID], name)
	}
}

func (l *chaosLedger) logged(attemptID string, line int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines[attemptID] = max(l.lines[attemptID], line+1)
}

// resulted notes a result the controller answered with success. A repeat
// of an attempt's accepted result must be answered as a repeat.
func (l *chaosLedger) resulted(j *api.Job, resp api.ResultResponse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.results[j.ID], j.AttemptID) {
		l.results[j.ID] = append(l.results[j.ID], j.AttemptID)
	} else if !resp.Duplicate {
		l.duplicates = append(l.duplicates, finding{j.ID, fmt.Sprintf("attempt %s's repeated result was answered as a new one: %+v", j.AttemptID, resp)})
	}
}

// mayConsume says whether an agent fault may cost build an attempt: once
// per build, so only the farm's own faults could make a dead letter of
// it (the default five attempts).
func (l *chaosLedger) mayConsume(buildID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.consumed[buildID] {
		return false
	}
	l.consumed[buildID] = true
	return true
}

func (l *chaosLedger) faulted(k agentFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults[k]++
}

// endedCount is how many builds an agent was told it ended.
func (l *chaosLedger) endedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.results)
}

// chaosVerdict is what the run did to its builds. Each finding is filed
// under its build (or idempotency key) in one of four kinds:
//   - lost: never created or never ended, cancelled by nobody, or missing
//     something the farm acknowledged (a log line, an artifact);
//   - duplicated: two builds for one submit, an attempt handed to two
//     agents, two attempts' results accepted for one build, a repeated
//     result taken as new;
//   - wrongly attached: a log line, artifact or result of another build
//     or attempt, or any call of an attempt accepted after another attempt
//     had the build;
//   - dead-lettered: failed after its last attempt (code max_attempts).
type chaosVerdict struct {
	lost, duplicated, misattached, deadLettered map[string][]string
	ending                                      map[string]string // build → the attempt whose result ended it
	completed, failed, attempts                 int
	abandonedWithArtifacts                      int // builds ended by a result with an earlier attempt's uploads beside it
}

func note(m map[string][]string, build, format string, args ...any) {
	m[build] = append(m[build], fmt.Sprintf(format, args...))
}

func (r *chaosRun) verdict(ctx context.Context, db *pgx.Conn) *chaosVerdict {
	t := r.t
	v := &chaosVerdict{lost: map[string][]string{}, duplicated: map[string][]string{}, misattached: map[string][]string{},
		deadLettered: map[string][]string{}, ending: map[string]string{}}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	for _, d := range r.l.duplicates {
		note(v.duplicated, d.build, "%s", d.what)
	}
	rows, err := db.Query(ctx, `SELECT idempotency_key, count(*) FROM builds WHERE idempotency_key IS NOT NULL GROUP BY 1 HAVING count(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	dupKeys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Key string
		N   int
	}])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range dupKeys {
		note(v.duplicated, k.Key, "%d builds for one submit", k.N)
	}
	var total int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM builds`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total > len(r.keys) {
		note(v.duplicated, "the farm", "%d builds for %d submits", total, len(r.keys))
	}
	for i, id := range r.ids {
		if id == "" {
			note(v.lost, r.keys[i], "the submit never succeeded")
			continue
		}
		var b api.Build
		if err := r.f.do(ctx, func(ctx context.Context, c *api.Client) (err error) { b, err = c.GetBuild(ctx, id); return err }); err != nil {
			note(v.lost, id, "the controller does not give it: %v", err)
			continue
		}
		v.checkBuild(r.l, b, r.readLog(ctx, id, v))
	}
	return v
}

// readLog reads build id's whole log.
func (r *chaosRun) readLog(ctx context.Context, id string, v *chaosVerdict) string {
	var log []byte
	for {
		var chunk api.LogChunk
		if err := r.f.do(ctx, func(ctx context.Context, c *api.Client) (err error) {
			chunk, err = c.ReadLogs(ctx, id, int64(len(log)))
			return err
		}); err != nil {
			note(v.lost, id, "its log cannot be read: %v", err)
			return string(log)
		}
		log = append(log, chunk.Data...)
		if int64(len(log)) >= chunk.Length || len(chunk.Data) == 0 {
			return string(log)
		}
	}
}

// checkBuild holds one build's record against the ledger (which the
// caller holds locked).
func (v *chaosVerdict) checkBuild(l *chaosLedger, b api.Build, log string) {
	history := slices.Clone(b.AttemptHistory)
	sort.Slice(history, func(i, j int) bool { return history[i].Number < history[j].Number })
	v.attempts += len(history)
	numbers := map[string]int{}
	for _, at := range history {
		numbers[at.ID] = at.Number
	}
	v.checkLog(l, b.ID, log, history, numbers)

	// Once an attempt has the build, no call of an earlier one may be
	// accepted: the earlier attempt ended when the later was claimed.
	for _, x := range history {
		for _, y := range history {
			c, ok := l.claims[y.ID]
			if call := l.accepts[x.ID]; y.Number > x.Number && ok && call.sent.After(c.at) {
				note(v.misattached, b.ID, "%s of attempt %d (%s) was accepted, sent %s after attempt %d (%s) had the build",
					call.what, x.Number, x.ID, call.sent.Sub(c.at).Round(time.Millisecond), y.Number, y.ID)
			}
		}
	}
	if accepted := l.results[b.ID]; len(accepted) > 1 {
		note(v.duplicated, b.ID, "the results of attempts %v were all accepted", accepted)
	}

	switch {
	case !ended(b.Status):
		note(v.lost, b.ID, "still %s after the drain (attempts: %s)", b.Status, attemptsText(history))
		return
	case b.Status == api.StatusCancelled:
		note(v.lost, b.ID, "cancelled, by nobody")
		return
	case b.Status == api.StatusFailed && deref(b.ErrorCode) == "max_attempts":
		note(v.deadLettered, b.ID, "%s (attempts: %s)", deref(b.ErrorMessage), attemptsText(history))
		return
	}
	var enders []string
	for _, at := range history {
		if at.Status == "completed" || at.Status == "failed" {
			enders = append(enders, at.ID)
		}
	}
	if len(enders) != 1 {
		note(v.duplicated, b.ID, "%s by %d attempts (attempts: %s)", b.Status, len(enders), attemptsText(history))
		return
	}
	ender := enders[0]
	v.ending[b.ID] = ender
	if !slices.Contains(l.results[b.ID], ender) {
		note(v.misattached, b.ID, "ended by attempt %s, whose result no agent was told was accepted", ender)
	}
	switch {
	case b.Status == api.StatusCompleted && !wantFail(b.ID):
		v.completed++
	case b.Status == api.StatusFailed && wantFail(b.ID) && deref(b.ErrorCode) == chaosFailCode && deref(b.ErrorMessage) == failMessage(ender):
		v.failed++
	default:
		note(v.misattached, b.ID, "%s with %q %q; its attempt %s reported %s", b.Status, deref(b.ErrorCode), deref(b.ErrorMessage), ender,
			map[bool]string{true: "failure on purpose", false: "success"}[wantFail(b.ID)])
	}

	// Exactly the ending attempt's artifacts, with its bytes.
	want := slices.Clone(l.uploads[ender])
	if b.Status == api.StatusCompleted {
		want = append(want, resultFile)
	}
	var got []string
	for _, art := range b.Artifacts {
		got = append(got, art.Name)
		switch {
		case !slices.Contains(want, art.Name):
			note(v.misattached, b.ID, "lists %s, which its ending attempt %s did not upload", art.Name, ender)
		case art.SHA256 != sha256hex(artifactBody(ender, art.Name)):
			note(v.misattached, b.ID, "%s is not its ending attempt's (%s) bytes", art.Name, ender)
		}
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			note(v.lost, b.ID, "does not list %s, which its ending attempt %s uploaded", name, ender)
		}
	}
	for _, at := range history {
		if at.ID != ender && len(l.uploads[at.ID]) > 0 {
			v.abandonedWithArtifacts++
			break
		}
	}
}

// checkLog holds a build's log against its attempts: every line is one of
// this build's attempts', each attempt's lines come in order and together,
// the attempts in the order they ran, and every line the controller
// acknowledged is there.
func (v *chaosVerdict) checkLog(l *chaosLedger, buildID, log string, history []api.Attempt, numbers map[string]int) {
	if log != "" && !strings.HasSuffix(log, "\n") {
		note(v.misattached, buildID, "its log ends in a torn line: %q", log[strings.LastIndexByte(log, '\n')+1:])
	}
	count := map[string]int{}
	cur, last := "", 0
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		if line == "" && log == "" {
			break
		}
		f := strings.Fields(line)
		i, err := strconv.Atoi(f[len(f)-1])
		if len(f) != 6 || f[0] != "build" || f[2] != "attempt" || f[4] != "line" || err != nil {
			note(v.misattached, buildID, "its log holds a line no attempt wrote: %q", line)
			continue
		}
		n, ours := numbers[f[3]]
		switch {
		case f[1] != buildID:
			note(v.misattached, buildID, "its log holds a line of build %s: %q", f[1], line)
			continue
		case !ours:
			note(v.misattached, buildID, "its log holds a line of attempt %s, not one of its own: %q", f[3], line)
			continue
		case f[3] != cur && n <= last:
			note(v.misattached, buildID, "its log has attempt %d's lines again after attempt %d's: %q", n, last, line)
		}
		if f[3] != cur {
			cur, last = f[3], n
		}
		if i >= logLines {
			note(v.misattached, buildID, "its log holds line %d of attempt %d, which only a zombie writes, after its attempt ended", i, n)
		} else if i != count[cur] {
			note(v.misattached, buildID, "its log has line %d of attempt %d where line %d was due", i, n, count[cur])
		}
		count[cur]++
	}
	for _, at := range history {
		if acked := l.lines[at.ID]; count[at.ID] < acked {
			note(v.lost, buildID, "its log holds %d of the %d lines attempt %d's appends were acknowledged for", count[at.ID], acked, at.Number)
		}
	}
}

// attemptsText is a build's attempts in a line: number, status, error code.
func attemptsText(history []api.Attempt) string {
	var out []string
	for _, at := range history {
		s := fmt.Sprintf("%d %s", at.Number, at.Status)
		if at.ErrorCode != nil {
			s += " (" + *at.ErrorCode + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// faultCounts is what the farm's faults were and how they overlapped.
type faultCounts struct {
	replicaKills, pgRestarts, pgCrashes int
	bothReplicasDown                    int // outages of one replica that overlapped one of the other
	pgWithReplicaDown                   int // Postgres outages during which a replica was down too
	longestPostgres                     time.Duration
}

func countFaults(outages []outage) faultCounts {
	var c faultCounts
	overlap := func(a, b outage) bool { return a.from.Before(b.to) && b.from.Before(a.to) }
	for _, o := range outages {
		switch {
		case o.what == "postgres":
			if o.crash {
				c.pgCrashes++
			} else {
				c.pgRestarts++
			}
			c.longestPostgres = max(c.longestPostgres, o.to.Sub(o.from))
			if slices.ContainsFunc(outages, func(p outage) bool { return p.what != "postgres" && overlap(o, p) }) {
				c.pgWithReplicaDown++
			}
		default:
			c.replicaKills++
			for _, p := range outages {
				if o.what == "R0" && p.what == "R1" && overlap(o, p) {
					c.bothReplicasDown++
				}
			}
		}
	}
	return c
}

// report logs the run's figures and fails the test on any finding, or when
// the faults did not reach what the test is about.
func (v *chaosVerdict) report(t *testing.T, r *chaosRun, faulted, drained time.Duration) {
	r.f.mu.Lock()
	fc := countFaults(r.f.outages)
	tooMany := "none"
	if len(r.f.tooMany) > 0 {
		tooMany = fmt.Sprint(r.f.tooMany)
	}
	r.f.mu.Unlock()
	var agentFaults []string
	for k := restartAfterUploads; k < agentFaultKinds; k++ {
		agentFaults = append(agentFaults, fmt.Sprintf("%s %d", k, r.l.faults[k]))
	}
	submitted := len(r.keys)
	t.Logf("chaos: %d builds (%d completed, %d failed on purpose) in %d attempts; lost %d, duplicated %d, wrongly attached %d, dead-lettered %d",
		submitted, v.completed, v.failed, v.attempts, len(v.lost), len(v.duplicated), len(v.misattached), len(v.deadLettered))
	t.Logf("chaos: %s of builds under faults (%.1f builds/s), then drained in %s; %d agents, lease %s",
		faulted.Round(time.Second), float64(submitted)/faulted.Seconds(), drained.Round(100*time.Millisecond), r.plan.agents, r.plan.leaseTTL)
	t.Logf("chaos: farm faults: %d replica kills (both replicas down %d times), %d Postgres restarts and %d crashes (%d with a replica down too; longest %s); agent faults: %s",
		fc.replicaKills, fc.bothReplicasDown, fc.pgRestarts, fc.pgCrashes, fc.pgWithReplicaDown, fc.longestPostgres.Round(100*time.Millisecond),
		strings.Join(agentFaults, ", "))
	t.Logf("chaos: calls repeated: %d network errors, %d 5xx, 429s (by budget) %s; %d builds ended by a result had an earlier attempt's uploads beside them",
		r.f.retried.network.Load(), r.f.retried.unavailable.Load(), tooMany, v.abandonedWithArtifacts)
	for _, kind := range []struct {
		name string
		m    map[string][]string
	}{{"lost", v.lost}, {"duplicated", v.duplicated}, {"wrongly attached", v.misattached}, {"dead-lettered", v.deadLettered}} {
		if len(kind.m) == 0 {
			continue
		}
		var lines []string
		for _, b := range slices.Sorted(maps.Keys(kind.m)) {
			if len(lines) == 20 {
				lines = append(lines, "…")
				break
			}
			lines = append(lines, b+": "+strings.Join(kind.m[b], "; "))
		}
		t.Errorf("%d builds %s:\n%s", len(kind.m), kind.name, strings.Join(lines, "\n"))
	}
	if v.abandonedWithArtifacts == 0 {
		t.Error("no build ended by a result had an abandoned attempt that uploaded artifacts: the faults did not reach the case under test")
	}
	if r.l.faults[zombie] == 0 {
		t.Error("no zombie came back: the faults did not reach the case under test")
	}
	if !r.plan.long {
		return
	}
	for k := restartAfterUploads; k < agentFaultKinds; k++ {
		if r.l.faults[k] == 0 {
			t.Errorf("no agent fault %q happened: run more builds", k)
		}
	}
	if fc.bothReplicasDown == 0 || fc.pgWithReplicaDown == 0 || fc.pgRestarts == 0 || fc.pgCrashes == 0 {
		t.Errorf("the farm's faults did not overlap (%+v): run more builds", fc)
	}
}
