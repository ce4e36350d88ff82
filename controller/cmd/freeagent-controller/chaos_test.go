package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/store"
)

// chaosBuildsEnv turns on the chaos test's long mode: that many builds
// under overlapping faults (`make chaos` runs 1,000). Unset, the test is
// the short run `make test` includes.
const chaosBuildsEnv = "FREEAGENT_CHAOS_BUILDS"

// chaosPlan is the size of a chaos run and the shape of its faults.
type chaosPlan struct {
	builds   int
	agents   int
	leaseTTL time.Duration
	// build is how long an attempt works, on average, between its
	// uploads: the time in which faults find it running.
	build time.Duration
	// long: the faults come from concurrent loops, overlapping, for as
	// long as builds are being submitted; otherwise from one short fixed
	// sequence.
	long       bool
	drainLimit time.Duration // how long the builds may take to end once the faults stop
}

func chaosPlanFor(t *testing.T) chaosPlan {
	v := os.Getenv(chaosBuildsEnv)
	if v == "" {
		return chaosPlan{builds: 12, agents: 3, leaseTTL: 3 * time.Second, build: 500 * time.Millisecond, drainLimit: time.Minute}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of builds, e.g. %s=1000", chaosBuildsEnv, v, chaosBuildsEnv)
	}
	// A longer lease than the short run's: overlapping faults make longer
	// outages (both replicas down while Postgres recovers from a crash),
	// and a lease that lapses in one costs the build an attempt, which
	// the dead-letter count would then charge to the farm.
	return chaosPlan{builds: n, agents: 12, leaseTTL: 10 * time.Second, build: 2 * time.Second, long: true, drainLimit: 10 * time.Minute}
}

// chaosFarm is two controller processes on one Postgres cluster and one
// file store, which the test kills and restarts under running builds.
type chaosFarm struct {
	bin    string
	args   []string
	pgDir  string
	pgPort int
	apiKey string

	// One fault at a time per part: the storm's loops skip a part another
	// loop has down.
	pgFault      sync.Mutex
	replicaFault [2]sync.Mutex

	mu       sync.Mutex
	replicas [2]*replica // nil while one is down
	pg       *pgcluster.Cluster
	outages  []outage
	tooMany  map[string]int // 429 answers the clients waited out, by the budget they named

	retried struct{ network, unavailable atomic.Int64 } // other failed calls the clients repeated, by cause
}

// outage is a part of the farm down: what ("R0", "R1", "postgres") and when.
type outage struct {
	what     string
	crash    bool // Postgres killed, not shut down
	from, to time.Time
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// supervise is how the farm's parts are brought back: again and again, as
// a service manager restarts a process, until it runs or a minute passed.
func supervise(ctx context.Context, start func(context.Context) error) error {
	return api.Retry(ctx, api.RetryPolicy{Backoff: api.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.5},
		Budget: time.Minute, Retryable: func(error) bool { return true }}, start)
}

// startPostgres starts the cluster (durable: a crash loses nothing a
// commit acknowledged, as in production). A server killed a moment ago may
// still be going away; supervise waits for it.
func (f *chaosFarm) startPostgres(ctx context.Context) error {
	return supervise(ctx, func(ctx context.Context) error {
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: f.pgDir, Port: f.pgPort, Durable: true})
		if err != nil {
			return fmt.Errorf("start postgres: %w", err)
		}
		f.mu.Lock()
		f.pg = pg
		f.mu.Unlock()
		return nil
	})
}

// restartPostgres takes Postgres down and starts it again: a fast shutdown
// (open transactions aborted, every connection dropped) or, with crash, a
// SIGKILL of the server, whose start then recovers from its WAL. It does
// nothing while another fault has Postgres down.
func (f *chaosFarm) restartPostgres(ctx context.Context, crash bool) error {
	if !f.pgFault.TryLock() {
		return nil
	}
	defer f.pgFault.Unlock()
	f.mu.Lock()
	pg := f.pg
	f.mu.Unlock()
	from := time.Now()
	if crash {
		if err := killPostmaster(f.pgDir); err != nil {
			return err
		}
	}
	pg.Stop() //nolint:errcheck // after a crash it reports the server had exited; either way it is started again below
	api.Sleep(ctx, 300*time.Millisecond)
	err := f.startPostgres(ctx)
	f.noteOutage(outage{what: "postgres", crash: crash, from: from, to: time.Now()})
	return err
}

// killPostmaster kills the server named by the cluster's postmaster.pid.
func killPostmaster(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("crash postgres: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("crash postgres: postmaster.pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("crash postgres: kill %d: %w", pid, err)
	}
	return nil
}

// killReplica kills replica i (SIGKILL, no clean shutdown) and, down for
// the given time, starts another in its place. It does nothing while
// another fault has that replica down.
func (f *chaosFarm) killReplica(ctx context.Context, i int, down time.Duration) error {
	if !f.replicaFault[i].TryLock() {
		return nil
	}
	defer f.replicaFault[i].Unlock()
	f.mu.Lock()
	r := f.replicas[i]
	f.replicas[i] = nil
	f.mu.Unlock()
	from := time.Now()
	if r != nil { // nil when its last start failed: start it now
		r.stop()
	}
	api.Sleep(ctx, down)
	err := f.startReplica(ctx, i)
	f.noteOutage(outage{what: fmt.Sprint("R", i), from: from, to: time.Now()})
	return err
}

// startReplica starts replica i; one that exits before it listens (its
// database is down) is started again.
func (f *chaosFarm) startReplica(ctx context.Context, i int) error {
	return supervise(ctx, func(context.Context) error {
		r, err := launchReplica(f.bin, append([]string{"--name", fmt.Sprint("R", i)}, f.args...)...)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.replicas[i] = r
		f.mu.Unlock()
		return nil
	})
}

// stopReplicas kills the replicas for good.
func (f *chaosFarm) stopReplicas() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.replicas {
		if r != nil {
			r.stop()
			f.replicas[i] = nil
		}
	}
}

func (f *chaosFarm) noteOutage(o outage) {
	f.mu.Lock()
	f.outages = append(f.outages, o)
	f.mu.Unlock()
}

// client returns an API client of a live replica, chosen at random.
func (f *chaosFarm) client() *api.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []*replica
	for _, r := range f.replicas {
		if r != nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return &api.Client{BaseURL: "http://127.0.0.1:1", APIKey: f.apiKey}
	}
	return &api.Client{BaseURL: live[rand.IntN(len(live))].URL, APIKey: f.apiKey}
}

// callBudget bounds how long one call is repeated through outages: longer
// than any the faults make, so a call given up on is news.
const callBudget = time.Minute

// do calls fn on live replicas with the clients' one retry policy (a
// replica or the database down, or a 429, is tried again on another
// replica, honouring Retry-After) until it succeeds, fails for good, or
// callBudget is spent.
func (f *chaosFarm) do(ctx context.Context, fn func(context.Context, *api.Client) error) error {
	policy := api.RetryPolicy{Backoff: api.Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5}, Budget: callBudget,
		OnRetry: func(err error, _ int, _ time.Duration) {
			var e *api.Error
			switch code := api.StatusOf(err); {
			case code == http.StatusTooManyRequests && errors.As(err, &e):
				f.mu.Lock()
				f.tooMany[e.Budget]++
				f.mu.Unlock()
			case code >= 500:
				f.retried.unavailable.Add(1)
			default:
				f.retried.network.Add(1)
			}
		}}
	return api.Retry(ctx, policy, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return fn(ctx, f.client())
	})
}

// between is a random duration in [lo, hi).
func between(lo, hi time.Duration) time.Duration { return lo + rand.N(hi-lo) }

// artifactSize is large enough that a request cut halfway has sent the
// controller part of its body (the HTTP client buffers 4 KiB).
const artifactSize = 32 << 10

// artifactBody is what attempt uploads as name: its own, recognisable bytes.
func artifactBody(attemptID, name string) string {
	line := "made by attempt " + attemptID + " as " + name + "\n"
	return strings.Repeat(line, artifactSize/len(line)+1)[:artifactSize]
}

// resultFile is the artifact a successful completion carries.
const resultFile = "result.txt"

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// logLine is line i of attempt's log.
func logLine(buildID, attemptID string, i int) string {
	return fmt.Sprintf("build %s attempt %s line %d\n", buildID, attemptID, i)
}

// logLines is how many lines an attempt that completes writes.
const logLines = 3

// chaosFailCode marks the builds that fail on purpose (about one in ten,
// chosen by their ID), so results are checked both ways.
const chaosFailCode = "chaos_build_failed"

func wantFail(buildID string) bool { return sha256.Sum256([]byte(buildID))[0] < 26 }

func failMessage(attemptID string) string { return "attempt " + attemptID + " failed on purpose" }

// errAgentDied cuts a request short: the agent died while sending it.
var errAgentDied = errors.New("the agent died mid-request")

// agentFault is what an agent does wrong on its next attempt.
type agentFault int32

const (
	behave agentFault = iota
	// restartAfterUploads: restarts (registers again) with its uploads
	// done; the attempt is handed back without being counted.
	restartAfterUploads
	// zombie: goes silent past its lease, and once another attempt has
	// the build carries on as if nothing happened; every call it makes
	// then must be refused. Its attempt is counted (one per build, see
	// chaosLedger.mayConsume).
	zombie
	// killedMidUpload: dies halfway through sending an artifact, restarts.
	killedMidUpload
	// killedMidCompletion: dies halfway through sending its completion's
	// file, restarts.
	killedMidCompletion
	// repeatCompletion: sends its completion twice, as after a lost answer.
	repeatCompletion
	agentFaultKinds
)

func (k agentFault) String() string {
	return [...]string{"behave", "restart after uploads", "zombie", "killed mid-upload", "killed mid-completion", "repeated completion"}[k]
}

// chaosAgent is a worker that runs builds: every attempt writes its log
// lines, uploads an artifact named after itself and one named app.apk
// (the two upload routes, raw and multipart), and completes with a result
// file, or fails on purpose where wantFail says so. Told to, it does one
// agentFault on its next attempt.
type chaosAgent struct {
	f     *chaosFarm
	l     *chaosLedger
	lease time.Duration
	build time.Duration // chaosPlan.build
	name  string
	id    string
	token string
	fault atomic.Int32 // an agentFault for its next attempt
}

func (a *chaosAgent) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		a.token = g.AccessToken
	}
}

// register registers the agent, or registers it again: a restarted agent,
// whose attempts the controller hands back.
func (a *chaosAgent) register(ctx context.Context) error {
	return a.f.do(ctx, func(ctx context.Context, c *api.Client) error {
		reg, err := c.Register(ctx, api.RegisterRequest{ID: a.id, Name: a.name, Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
		if err == nil {
			a.id, a.token = reg.ID, reg.AccessToken
		}
		return err
	})
}

func (a *chaosAgent) run(ctx context.Context) {
	for ctx.Err() == nil {
		var job *api.Job
		err := a.f.do(ctx, func(ctx context.Context, c *api.Client) error {
			resp, err := c.Poll(ctx, a.token, time.Second)
			if err == nil {
				a.keep(resp.TokenGrant)
				job = resp.Job
			}
			return err
		})
		switch {
		case api.StatusOf(err) == http.StatusUnauthorized: // the token was lost with an answer: start again
			a.register(ctx) //nolint:errcheck // retried on the next round
		case err != nil:
			api.Sleep(ctx, time.Second)
		case job != nil:
			// A job in hand is seen through: the test stops polling, not
			// working, so no accepted call goes unrecorded.
			a.runJob(context.WithoutCancel(ctx), job)
		}
	}
}

// takeFault returns the fault the agent was told to do, if it can be done
// on this job; otherwise it keeps it for a later one.
func (a *chaosAgent) takeFault(j *api.Job) agentFault {
	k := agentFault(a.fault.Swap(int32(behave)))
	if (k == zombie && !a.l.mayConsume(j.ID)) || (k == killedMidCompletion && wantFail(j.ID)) {
		a.fault.CompareAndSwap(int32(behave), int32(k))
		return behave
	}
	return k
}

// call makes one call of attempt j through live replicas and notes, when
// the controller accepted it, what it was and when it was sent.
func (a *chaosAgent) call(ctx context.Context, j *api.Job, what string, fn func(context.Context, *api.Client) error) error {
	var sent time.Time
	err := a.f.do(ctx, func(ctx context.Context, c *api.Client) error {
		sent = time.Now()
		return fn(ctx, c)
	})
	if err == nil {
		a.l.accepted(j.AttemptID, what, sent)
	}
	return err
}

func (a *chaosAgent) runJob(ctx context.Context, j *api.Job) {
	a.l.claimed(j, a.name)
	fault := a.takeFault(j)
	if a.heartbeat(ctx, j) != nil {
		return // the lease is gone: drop the job, as an agent does
	}
	var vmToken string
	if err := a.call(ctx, j, "the OTP exchange", func(ctx context.Context, c *api.Client) error {
		auth, err := c.VMAuth(ctx, j.ID, j.OTP)
		vmToken = auth.VMToken
		return err
	}); err != nil {
		return // a lost answer used the OTP: the attempt goes silent and expires
	}
	logAt := int64(-1)
	if a.appendLog(ctx, j, vmToken, &logAt, 0) != nil {
		return
	}
	own := j.AttemptID + ".apk"
	if fault == killedMidUpload {
		a.l.faulted(fault)
		body := artifactBody(j.AttemptID, own)
		// It fails: the agent died sending it. Restarted, the agent
		// registers again and its attempt goes back to the queue.
		a.f.client().PutArtifact(ctx, j.ID, vmToken, own, cutShort(body), int64(len(body)), sha256hex(body)) //nolint:errcheck
		a.register(ctx)                                                                                      //nolint:errcheck
		return
	}
	a.work(ctx)
	if a.upload(ctx, j, vmToken, own, true) != nil || a.heartbeat(ctx, j) != nil || a.appendLog(ctx, j, vmToken, &logAt, 1) != nil {
		return
	}
	a.work(ctx)
	if a.upload(ctx, j, vmToken, "app.apk", false) != nil || a.heartbeat(ctx, j) != nil || a.appendLog(ctx, j, vmToken, &logAt, 2) != nil {
		return
	}
	switch fault {
	case restartAfterUploads:
		a.l.faulted(fault)
		a.register(ctx) //nolint:errcheck // a restarted agent: its attempt goes back to the queue
		return
	case zombie:
		a.l.faulted(fault)
		a.haunt(ctx, j, vmToken)
		return
	}
	a.complete(ctx, j, fault)
}

// work is half an attempt's build: a while, well inside its lease.
func (a *chaosAgent) work(ctx context.Context) { api.Sleep(ctx, between(a.build/4, a.build*3/4)) }

func (a *chaosAgent) heartbeat(ctx context.Context, j *api.Job) error {
	return a.call(ctx, j, "a heartbeat", func(ctx context.Context, c *api.Client) error {
		resp, err := c.Heartbeat(ctx, a.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
		if err == nil {
			a.keep(resp.TokenGrant)
		}
		return err
	})
}

// appendLog appends line i of the attempt's log at the log's end, which
// it learns as freeagent-vm does: an empty append answers the log's length.
func (a *chaosAgent) appendLog(ctx context.Context, j *api.Job, vmToken string, at *int64, i int) error {
	line := []byte(logLine(j.ID, j.AttemptID, i))
	err := a.call(ctx, j, fmt.Sprintf("log line %d", i), func(ctx context.Context, c *api.Client) error {
		if *at < 0 {
			n, err := c.AppendLog(ctx, j.ID, vmToken, 0, nil)
			if err != nil {
				return err
			}
			*at = n
		}
		n, err := c.AppendLog(ctx, j.ID, vmToken, *at, line)
		if err != nil {
			return err
		}
		if n != *at+int64(len(line)) {
			return fmt.Errorf("appending %d bytes at %d left the log %d bytes long", len(line), *at, n)
		}
		*at = n
		return nil
	})
	if err == nil {
		a.l.logged(j.AttemptID, i)
	}
	return err
}

// upload sends one of the attempt's artifacts, raw (PUT) or multipart.
func (a *chaosAgent) upload(ctx context.Context, j *api.Job, vmToken, name string, raw bool) error {
	body := artifactBody(j.AttemptID, name)
	err := a.call(ctx, j, "artifact "+name, func(ctx context.Context, c *api.Client) (err error) {
		if raw {
			_, err = c.PutArtifact(ctx, j.ID, vmToken, name, strings.NewReader(body), int64(len(body)), sha256hex(body))
		} else {
			_, err = c.UploadArtifact(ctx, j.ID, vmToken, name, strings.NewReader(body), sha256hex(body))
		}
		return err
	})
	if err == nil {
		a.l.uploaded(j.AttemptID, name)
	}
	return err
}

// result is the attempt's completion: a success carrying resultFile, or
// where wantFail says so a failure naming the attempt.
func result(j *api.Job) api.Result {
	r := api.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}
	if wantFail(j.ID) {
		r.Success, r.ErrorCode, r.ErrorMessage = false, chaosFailCode, failMessage(j.AttemptID)
		return r
	}
	body := artifactBody(j.AttemptID, resultFile)
	r.FileName, r.File, r.SHA256 = resultFile, strings.NewReader(body), sha256hex(body)
	return r
}

func (a *chaosAgent) complete(ctx context.Context, j *api.Job, fault agentFault) {
	if fault == killedMidCompletion {
		a.l.faulted(fault)
		r := result(j)
		r.File = cutShort(artifactBody(j.AttemptID, resultFile))
		// As with killedMidUpload.
		a.f.client().Upload(ctx, a.token, r) //nolint:errcheck
		a.register(ctx)                      //nolint:errcheck
		return
	}
	for range 1 + btoi(fault == repeatCompletion) {
		var resp api.ResultResponse
		if a.call(ctx, j, "its result", func(ctx context.Context, c *api.Client) (err error) {
			resp, err = c.Upload(ctx, a.token, result(j))
			return err
		}) != nil {
			return // a lost completion expires and runs again
		}
		a.l.resulted(j, resp)
	}
	if fault == repeatCompletion {
		a.l.faulted(fault)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// haunt is a zombie's second life: silent until the build has moved on
// to another attempt (or ended), it then carries on as if it still held
// the build: a heartbeat, a log line, an artifact, its completion. The
// controller must refuse each; the ledger notes any it accepts. A build
// that does not move on within three leases is left as it is: the drain
// finds it stuck.
func (a *chaosAgent) haunt(ctx context.Context, j *api.Job, vmToken string) {
	for deadline := time.Now().Add(3*a.lease + 30*time.Second); ; api.Sleep(ctx, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			return
		}
		var b api.Build
		err := a.f.do(ctx, func(ctx context.Context, c *api.Client) (err error) { b, err = c.GetBuild(ctx, j.ID); return err })
		if err == nil && movedOn(b, j.AttemptID) {
			break
		}
	}
	// The log line goes at the log's end, as a VM that reconnects asks
	// for it. Errors: refused, as they must be; anything else the
	// ledger notes.
	logAt := int64(-1)
	a.heartbeat(ctx, j)                            //nolint:errcheck
	a.appendLog(ctx, j, vmToken, &logAt, logLines) //nolint:errcheck
	a.upload(ctx, j, vmToken, "app.apk", true)     //nolint:errcheck
	a.complete(ctx, j, behave)
}

// movedOn says whether build b ended or went to an attempt after attemptID.
func movedOn(b api.Build, attemptID string) bool {
	if ended(b.Status) {
		return true
	}
	own := slices.IndexFunc(b.AttemptHistory, func(at api.Attempt) bool { return at.ID == attemptID })
	return own >= 0 && slices.ContainsFunc(b.AttemptHistory, func(at api.Attempt) bool { return at.Number > b.AttemptHistory[own].Number })
}

func ended(s api.BuildStatus) bool {
	return s == api.StatusCompleted || s == api.StatusFailed || s == api.StatusCancelled
}

// cutShort reads as the first half of s, then fails as a dying agent's
// request does.
func cutShort(s string) io.Reader {
	return io.MultiReader(strings.NewReader(s[:len(s)/2]), iotest.ErrReader(errAgentDied))
}

// chaosRun is one run: the farm, its agents, what was submitted.
type chaosRun struct {
	t      *testing.T
	plan   chaosPlan
	f      *chaosFarm
	l      *chaosLedger
	agents []*chaosAgent
	keys   []string // idempotency keys, one per build
	ids    []string // the build each key made; "" where the submit never succeeded
}

const emptyTarGz = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// submit submits n more builds, each with its own idempotency key, so a
// submit repeated after a lost answer makes no second build.
func (r *chaosRun) submit(ctx context.Context, n int) {
	for range n {
		key := fmt.Sprintf("chaos-%d", len(r.keys))
		var id string
		err := r.f.do(ctx, func(ctx context.Context, c *api.Client) error {
			sub, err := c.Submit(ctx, api.SubmitRequest{Platform: "android", IdempotencyKey: key, Source: strings.NewReader(emptyTarGz)})
			id = sub.ID
			return err
		})
		if err != nil {
			r.t.Errorf("submit %s: %v", key, err)
			id = ""
		}
		r.keys, r.ids = append(r.keys, key), append(r.ids, id)
	}
}

// submitPaced submits the run's builds, keeping about three per agent
// waiting or running, so builds are submitted, claimed and finished all
// through the faults. A farm that stops finishing builds for two minutes
// gets the rest at once; the verdict then says what was lost.
func (r *chaosRun) submitPaced(ctx context.Context) {
	window := 3 * r.plan.agents
	last, lastAt := 0, time.Now()
	for len(r.keys) < r.plan.builds {
		done := r.l.endedCount()
		if done != last {
			last, lastAt = done, time.Now()
		}
		if len(r.keys)-done >= window && time.Since(lastAt) < 2*time.Minute {
			api.Sleep(ctx, 20*time.Millisecond)
			continue
		}
		r.submit(ctx, 1)
	}
}

// storm makes overlapping faults until ctx ends. Two loops take turns at
// the farm's parts (a replica killed, Postgres shut down or crashed, or a
// replica killed while Postgres restarts), so at times both replicas are
// down too; a third tells agents to misbehave on their next attempt.
func (r *chaosRun) storm(ctx context.Context) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for api.Sleep(ctx, between(2*time.Second, 6*time.Second)) == nil {
				// The farm is made whole again even when the storm ends meanwhile.
				fctx := context.WithoutCancel(ctx)
				var errs [2]error
				switch n := rand.IntN(5); n {
				case 0, 1:
					errs[0] = r.f.killReplica(fctx, n, between(200*time.Millisecond, 3*time.Second))
				case 2, 3:
					errs[0] = r.f.restartPostgres(fctx, n == 3)
				case 4: // a replica killed while Postgres restarts or crashes
					var both sync.WaitGroup
					both.Go(func() { errs[0] = r.f.restartPostgres(fctx, rand.IntN(2) == 0) })
					both.Go(func() {
						api.Sleep(fctx, between(0, time.Second))
						errs[1] = r.f.killReplica(fctx, rand.IntN(2), between(200*time.Millisecond, 3*time.Second))
					})
					both.Wait()
				}
				if err := errors.Join(errs[:]...); err != nil {
					r.t.Errorf("the farm did not come back from a fault: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for api.Sleep(ctx, between(300*time.Millisecond, 1500*time.Millisecond)) == nil {
			a := r.agents[rand.IntN(len(r.agents))]
			a.fault.CompareAndSwap(int32(behave), int32(1+rand.IntN(int(agentFaultKinds)-1)))
		}
	})
	wg.Wait()
}

// shortFaults is the short run's faults, in turn, while its builds run.
func (r *chaosRun) shortFaults(ctx context.Context) {
	ag := r.agents
	faults := []func() error{
		func() error { ag[0].fault.Store(int32(restartAfterUploads)); return nil },
		func() error { ag[1].fault.Store(int32(zombie)); return nil },
		func() error { return r.f.killReplica(ctx, 0, 200*time.Millisecond) },
		func() error { ag[2].fault.Store(int32(killedMidUpload)); return nil },
		func() error { return r.f.restartPostgres(ctx, false) },
		func() error { ag[0].fault.Store(int32(killedMidCompletion)); return nil },
		func() error { return r.f.killReplica(ctx, 1, 200*time.Millisecond) },
		func() error { ag[2].fault.Store(int32(repeatCompletion)); return nil },
		func() error { r.submit(ctx, 4); return nil },
		func() error { return r.f.restartPostgres(ctx, true) },
		func() error { ag[0].fault.Store(int32(zombie)); return nil },
	}
	for _, fault := range faults {
		if err := fault(); err != nil {
			r.t.Fatalf("the farm did not come back from a fault: %v", err)
		}
		time.Sleep(1200 * time.Millisecond)
	}
}

// TestChaosNoBuildLostDuplicatedOrWronglyAttached kills and restarts
// controller replicas, Postgres (shut down and crashed) and agents (restarted,
// silent past their lease and back as zombies, killed mid-upload) while
// builds run; every attempt writes its log lines, uploads an artifact named
// after itself and one all attempts share (app.apk), and completes with a
// result file (or fails on purpose). Then no build is lost, duplicated or
// dead-lettered, and every build holds exactly the log, artifacts and
// result of its own attempts (the ones the agents were told were accepted,
// and the completing attempt's alone for artifacts and result); once the
// garbage collector ran, the disk holds no other attempt's files.
//
// The short run (12 builds, one fault at a time) is part of `make test`;
// FREEAGENT_CHAOS_BUILDS=N (`make chaos`: 1,000) runs N builds under
// overlapping faults and reports what the verdict counted and how long the
// farm took to drain.
func TestChaosNoBuildLostDuplicatedOrWronglyAttached(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts controller processes and Postgres")
	}
	plan := chaosPlanFor(t)
	ctx := context.Background()
	bin := controllerBinary(t)
	data := t.TempDir()
	// As root Postgres runs as the postgres user, who must reach its
	// directory: t.TempDir()'s parent is private.
	pgParent, err := os.MkdirTemp("", "fa-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pgParent) })
	if err := os.Chmod(pgParent, 0o711); err != nil {
		t.Fatal(err)
	}
	f := &chaosFarm{bin: bin, pgDir: filepath.Join(pgParent, "pg"), pgPort: freePort(t), tooMany: map[string]int{}}
	if err := f.startPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pg.Stop()
	})
	dsn := f.pg.DSN(pgcluster.DefaultDatabase)
	t.Setenv("DATABASE_URL", dsn)
	f.args = []string{"--data-dir", data, "--controller-ttl", "3s", "--reaper-interval", "200ms", "--lease-ttl", plan.leaseTTL.String(),
		"--gc-interval", "1h", "--min-free-disk", "0"}
	t.Cleanup(f.stopReplicas)
	for i := range f.replicas {
		if err := f.startReplica(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := runCmd(t, "keys", "create", "--name", "chaos", "--role", "admin")
	if code != 0 {
		t.Fatal("keys create failed")
	}
	f.apiKey = strings.TrimSpace(out)

	r := &chaosRun{t: t, plan: plan, f: f, l: newChaosLedger()}
	for i := range plan.agents {
		a := &chaosAgent{f: f, l: r.l, lease: plan.leaseTTL, build: plan.build, name: fmt.Sprint("agent-", i)}
		if err := a.register(ctx); err != nil {
			t.Fatal(err)
		}
		r.agents = append(r.agents, a)
	}
	agentCtx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, a := range r.agents {
		wg.Go(func() { a.run(agentCtx) })
	}
	defer func() { stopAgents(); wg.Wait() }()

	began := time.Now()
	if plan.long {
		stormCtx, calm := context.WithCancel(ctx)
		var storm sync.WaitGroup
		storm.Go(func() { r.storm(stormCtx) })
		r.submitPaced(ctx)
		calm()
		storm.Wait()
	} else {
		r.submit(ctx, 8)
		r.shortFaults(ctx)
	}
	calmFrom := time.Now()

	// Drain: no more faults; every build ends, its retries waiting out
	// their backoff as they would on any farm.
	settle, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer settle.Close(ctx)
	var open int
	for {
		if err := settle.QueryRow(ctx, `SELECT count(*) FROM builds WHERE status NOT IN ('completed', 'failed', 'cancelled')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 || time.Since(calmFrom) > plan.drainLimit {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(calmFrom)
	stopAgents()
	wg.Wait()

	v := r.verdict(ctx, settle)
	v.report(t, r, time.Since(began)-drained, drained)

	// Every build's strays (the artifacts of attempts that did not end
	// it) are still listed in the database: the verdict above read the
	// controller's doing, not the collector's, whose first pass is an
	// hour away.
	var strays int
	if err := settle.QueryRow(ctx, `SELECT count(*) FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.attempt_id IS DISTINCT FROM b.attempt_id`).Scan(&strays); err != nil {
		t.Fatal(err)
	}
	if strays == 0 {
		t.Fatal("no abandoned attempt's artifact rows: the listing was not put to the test")
	}

	// With the replicas stopped, one collection without grace leaves only
	// the ending attempts' artifacts and the sources on disk.
	f.stopReplicas()
	st, err := store.Open(ctx, dsn, store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := blobs.LoadOrCreateKey(filepath.Join(data, "certs.key"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := blobs.Open(filepath.Join(data, "files"), key)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(testLogWriter{t})
	rep, err := gc.New(st, files, gc.Config{OrphanGrace: time.Nanosecond, StagingMaxAge: time.Nanosecond, LeftoverAge: time.Nanosecond}, log).Collect(ctx)
	if err != nil || !rep.Ran || rep.Errors != 0 || rep.StrayArtifacts != strays {
		t.Fatalf("collection: %+v %v; want %d stray artifacts removed", rep, err, strays)
	}
	t.Logf("final collection: %+v", rep)
	root := filepath.Join(data, "files", "builds")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case len(parts) == 2 && parts[1] == blobs.SourceFile:
		case len(parts) == 4 && parts[1] == blobs.AttemptsDir && v.ending[parts[0]] == parts[2]:
		default:
			t.Errorf("left on disk: %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if leftover, _ := os.ReadDir(filepath.Join(data, "files", "uploads")); len(leftover) != 0 {
		t.Errorf("staging uploads left: %v", leftover)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
