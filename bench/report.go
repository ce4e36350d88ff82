package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// SummaryRow is one headline figure against its target.
type SummaryRow struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Shown  string  `json:"shown"` // Value, formatted with its unit
	Target string  `json:"target"`
	Pass   bool    `json:"pass"`
	Source string  `json:"source"` // where the target comes from
}

// Targets. Where the seeds or the design give a number it is used; the
// empty-poll budget is ours (see the Source of its row).
const (
	targetLifecyclesPerSecond = 500.0  // five times the seeds' "100+ builds/sec"
	targetPickupP50MS         = 50.0   // the design's pickup target
	targetPickupP99MS         = 250.0  // the design's pickup target (the seeds wait up to 30 s)
	targetCancelP99MS         = 2000.0 // a cancel ends a running build within 2 s
	targetEmptyPollCPUPer1000 = 1.0    // ≤ 1 ms of controller + Postgres CPU per empty poll
	targetClaimRatio          = 2.0
	targetRSSGrowthMiB        = 64.0
	targetPgbenchRatio        = 0.70
	targetTransferRatio       = 0.80 // ≥ 0.8 × a copy + fsync on the same disk
	targetS3CPUPerGiB         = 0.05 // "near zero" CPU per GiB with S3; ours: 50 ms
	targetStormRatio          = 0.85 // the storm with budgets drains at the rate without, within noise
)

func summarize(r *Report) []SummaryRow {
	var rows []SummaryRow
	if l := r.Lifecycle; l != nil {
		rows = append(rows, SummaryRow{Name: "HTTP lifecycles/s (" + l.Shape.String() + ")", Value: l.PerSecond,
			Shown: fmt.Sprintf("%.0f /s", l.PerSecond), Target: fmt.Sprintf("≥ %.0f /s", targetLifecyclesPerSecond),
			Pass: l.PerSecond >= targetLifecyclesPerSecond, Source: "target: ≥ 500 lifecycles/s on the 2-core CI machine"})
	}
	if c := r.Cancel; c != nil {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Cancel → cancelled p99 (p50 %s)", ms(c.Latency.P50)), Value: c.Latency.P99,
			Shown: ms(c.Latency.P99), Target: fmt.Sprintf("p99 < %.0f ms", targetCancelP99MS), Pass: c.Latency.P99 < targetCancelP99MS,
			Source: "target: a cancel ends a running build within 2 s"})
	}
	if p := r.Pickup; p != nil {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Pickup latency p99 (p50 %s)", ms(p.FromSubmit.P50)), Value: p.FromSubmit.P99,
			Shown: ms(p.FromSubmit.P99), Target: fmt.Sprintf("p50 < %.0f, p99 < %.0f ms", targetPickupP50MS, targetPickupP99MS),
			Pass:   p.FromSubmit.P99 < targetPickupP99MS && p.FromSubmit.P50 < targetPickupP50MS,
			Source: "target: pickup p50 < 50 ms, p99 < 250 ms"})
	}
	if p := r.EmptyPoll; p != nil {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Empty poll CPU per 1000 (%.0f polls/s)", p.PerSecond), Value: p.CPUPer1000,
			Shown: fmt.Sprintf("%.3f CPU-s", p.CPUPer1000), Target: fmt.Sprintf("≤ %.1f CPU-s", targetEmptyPollCPUPer1000),
			Pass: p.CPUPer1000 <= targetEmptyPollCPUPer1000, Source: "benchmark's budget: ≤ 1 ms controller+Postgres CPU per empty poll"})
	}
	if st := r.Storm; st != nil {
		refused := st.On.Total429()
		for _, run := range st.Runs {
			if run.Limits {
				refused = max(refused, run.Total429())
			}
		}
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Storm %d workers × %d builds, one worker key: budgets on ÷ off (%.0f ÷ %.0f /s; 429s with budgets: %d)",
			st.Workers, st.Builds, st.On.PerSecond, st.Off.PerSecond, refused), Value: st.Ratio,
			Shown: fmt.Sprintf("%.2f", st.Ratio), Target: fmt.Sprintf("≥ %.2f, no 429", targetStormRatio),
			Pass: st.Ratio >= targetStormRatio && refused == 0, Source: "target: the production budgets answer a draining farm no 429 and cost it no throughput"})
	}
	if fl := r.Fleet; fl != nil && len(fl.Points) > 0 {
		p := fl.Points[len(fl.Points)-1]
		var refused, failed int64
		for _, q := range fl.Points {
			refused, failed = refused+q.Total429(), failed+q.ServerErrors
		}
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Fleet: workers one controller core carries (N=%d; 429s %d, 5xx %d)", p.Workers, refused, failed),
			Value: p.WorkersPerControllerCore, Shown: fmt.Sprintf("%.0f", p.WorkersPerControllerCore), Target: "no 429, no 5xx",
			Pass: refused == 0 && failed == 0, Source: "target: zero 429/5xx to the worker protocol at any N the machine can simulate"})
	}
	if a := r.Artifact; a != nil {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Controller RSS growth, %s artifact", size(a.Bytes)), Value: a.Growth,
			Shown: fmt.Sprintf("%.1f MiB", a.Growth), Target: fmt.Sprintf("< %.0f MiB", targetRSSGrowthMiB),
			Pass: a.Growth < targetRSSGrowthMiB, Source: "target"})
	}
	if x := r.Transfer; x != nil {
		shown := fmt.Sprintf("%.2f", x.UploadRatio)
		if x.UploadFloorSeconds > 0 {
			shown += fmt.Sprintf(" (its CPU allows %.2f here)", x.CopySeconds/x.UploadFloorSeconds)
		}
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Upload through the controller ÷ copy+fsync, %s", size(x.Bytes)), Value: x.UploadRatio,
			Shown: shown, Target: fmt.Sprintf("≥ %.2f", targetTransferRatio),
			Pass: x.UploadRatio >= targetTransferRatio, Source: "target: ≥ 0.8 × a copy + fsync on the same disk"})
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Download through the controller ÷ copy+fsync, %s", size(x.Bytes)), Value: x.DownloadRatio,
			Shown: fmt.Sprintf("%.2f", x.DownloadRatio), Target: fmt.Sprintf("≥ %.2f", targetTransferRatio),
			Pass: x.DownloadRatio >= targetTransferRatio, Source: "target: ≥ 0.8 × a copy + fsync on the same disk"})
		if s3 := x.S3; s3 != nil {
			// What the transfers cost, without what the controller's
			// background loops use in the same time anyway.
			net := max(s3.ControllerCPUPerGiB-s3.IdleCPUPerGiB, 0)
			rows = append(rows, SummaryRow{Name: fmt.Sprintf("Controller CPU per GiB moved with S3, direct (file store: %.2f)", x.StreamCPUPerGiB), Value: net,
				Shown:  fmt.Sprintf("%.3f CPU-s (%.3f with idle loops)", net, s3.ControllerCPUPerGiB),
				Target: fmt.Sprintf("≤ %.2f CPU-s", targetS3CPUPerGiB),
				Pass:   net <= targetS3CPUPerGiB, Source: "target: near zero, the controller only signs"})
		}
	}
	if p := r.Pgbench; p != nil && p.Skipped == "" && p.Ratio > 0 {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("HTTP ÷ pgbench lifecycles/s (ceiling %.0f /s)", p.BestPerSecond), Value: p.Ratio,
			Shown: fmt.Sprintf("%.2f", p.Ratio), Target: fmt.Sprintf("≥ %.2f", targetPgbenchRatio),
			Pass: p.Ratio >= targetPgbenchRatio, Source: "target"})
	}
	if c := r.Claim; c != nil {
		rows = append(rows, SummaryRow{Name: fmt.Sprintf("Claim p50 at %s ÷ at %s pending", count(c.Large.Pending), count(c.Small.Pending)),
			Value: c.Ratio, Shown: fmt.Sprintf("%.2f×", c.Ratio), Target: fmt.Sprintf("≤ %.0f×", targetClaimRatio),
			Pass: c.Ratio <= targetClaimRatio, Source: "target"})
	}
	return rows
}

// noisy flags a window in which other processes or other guests took a
// noticeable share of the CPUs.
func noisy(c CPUSplit) string {
	if c.Other+c.Stolen > 0.15 {
		return fmt.Sprintf("  ⚠ other work took %.2f cores: figures are pessimistic", c.Other+c.Stolen)
	}
	return ""
}

func size(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	default:
		return fmt.Sprintf("%d B", b)
	}
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprint(n)
	}
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	m := r.Machine
	p("Free Agent controller benchmark — %s", r.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	rev := ""
	if m.Revision != "" {
		rev = ", source " + m.Revision
	}
	p("machine: %d CPUs, %s, PostgreSQL %s (durable: fsync and synchronous_commit on)%s; run took %.0f s (setup %.0f s)",
		m.CPUs, m.GoVersion, m.Postgres, rev, r.Seconds, r.SetupSeconds)
	p("the load generator, the controller and Postgres share these CPUs; %.2f cores were busy just before the run%s",
		max(0, m.BusyAtStart), noisy(CPUSplit{Other: m.BusyAtStart}))

	if l := r.Lifecycle; l != nil {
		p("")
		p("1. Full lifecycles over HTTP (submit → claim → heartbeat → upload)")
		for _, s := range l.Sweep {
			p("   sweep %-12s %6.0f /s", s.Shape.String(), s.PerSecond)
		}
		p("   %v, backlog ≤ %d: %d lifecycles in %.1f s = %.0f lifecycles/s", l.Shape, l.Backlog, l.Completed, l.Seconds, l.PerSecond)
		for _, k := range []string{"submit", "poll", "heartbeat", "upload"} {
			p("   %-9s %v", k, l.Requests[k])
		}
		p("   empty polls in the window: %d; Postgres commits per lifecycle ≈ %.1f", l.EmptyPolls, l.CommitsPerLifecycle)
		p("   CPU cores busy: controller %.2f, Postgres %.2f, load generator %.2f, kernel %.2f; other processes %.2f, stolen %.2f%s",
			l.CPU.Controller, l.CPU.Postgres, l.CPU.Bench, l.CPU.Kernel, l.CPU.Other, l.CPU.Stolen, noisy(l.CPU))
		c := l.CPUPerLifecycle
		p("   CPU per lifecycle: controller %.2f ms + Postgres %.2f ms + load generator %.2f ms = %.2f ms",
			c.Controller, c.Postgres, c.Bench, c.Total())
	}
	if pk := r.Pickup; pk != nil {
		p("")
		p("2. Pickup latency (%d idle workers in long polls, one build every %.0f ms)", pk.Workers, pk.SpacingMS)
		p("   submit called → Poll returns the job:  %v", pk.FromSubmit)
		p("   submit answered → Poll returns the job: %v", pk.AfterAnswer)
		p("   the submit call alone:                 %v", pk.Submit)
	}
	if c := r.Cancel; c != nil {
		p("")
		p("2b. Cancel latency (a running build; the worker's cancel watch, then its report)")
		p("   cancel called → build cancelled: %v", c.Latency)
	}
	if e := r.EmptyPoll; e != nil {
		p("")
		p("3. Empty polls (wait=0, empty queue, %d clients, %.1f s)", e.Clients, e.Seconds)
		p("   %.0f polls/s; latency %v", e.PerSecond, e.Latency)
		p("   CPU-s per 1000: controller %.3f + Postgres (all processes) %.3f = %.3f; load generator %.3f",
			e.ControllerCPUPer1000, e.PostgresCPUPer1000, e.CPUPer1000, e.BenchCPUPer1000)
		p("   cores busy meanwhile: kernel %.2f, other processes %.2f, stolen %.2f%s", e.Cores.Kernel, e.Cores.Other, e.Cores.Stolen, noisy(e.Cores))
		p("   ⇒ one core of controller + Postgres time carries ≈ %.0f idle long-polling workers", e.IdleWorkersPerCore)
	}
	if st := r.Storm; st != nil {
		p("")
		p("3b. Storm: %d workers with one shared worker key drain %d queued builds, without request budgets and with the production ones", st.Workers, st.Builds)
		for _, run := range st.Runs {
			p("   budgets %-3s %.2f s = %4.0f builds/s; 429s %d %v, 5xx %d", onOff(run.Limits), run.Seconds, run.PerSecond, run.Total429(), run.Refused, run.ServerErrors)
		}
		p("   best with budgets ÷ best without: %.2f", st.Ratio)
	}
	if fl := r.Fleet; fl != nil {
		s := fl.Settings
		p("")
		p("3c. Fleet: simulated workers with the agent's request mix against the production defaults (budgets on)")
		p("   long poll %.0f s, cancel watch %.0f s, heartbeat %.1f s (0: the controller's), log %d B every %.1f s, artifact %s, builds %.0f s (±50%%), %.0f%% busy, %.0f%% cancelled; window %.0f s after %.0f s",
			s.PollWaitS, s.CancelWatchS, s.HeartbeatS, s.LogBytes, s.LogEveryS, size(s.ArtifactBytes), s.BuildS, 100*s.BusyShare, 100*s.CancelShare, s.WindowS, s.WarmupS)
		for _, pt := range fl.Points {
			p("   N=%d%s: busy %.0f%%, %d builds ended (%d cancelled), %.0f requests/s (%d empty long polls, %d cancel watches), heartbeats every %.1f s",
				pt.Workers, label(pt.Controller), 100*pt.Busy, pt.Builds, pt.Canceled, pt.RequestsPerSec, pt.EmptyPolls, pt.CancelWatches, pt.HeartbeatS)
			p("     Postgres transactions %.0f/s (a statement outside a transaction is one: a parked long poll's re-reads count)", pt.PostgresTPS)
			p("     CPU ms per worker per minute: controller %.1f, Postgres %.1f ⇒ one controller core carries %.0f workers, one core of both %.0f",
				pt.ControllerMSPerWorkerMin, pt.PostgresMSPerWorkerMin, pt.WorkersPerControllerCore, pt.WorkersPerCore)
			p("     cores busy: controller %.2f, Postgres %.2f, load generator %.2f, kernel %.2f, other %.2f%s",
				pt.CPU.Controller, pt.CPU.Postgres, pt.CPU.Bench, pt.CPU.Kernel, pt.CPU.Other, noisy(pt.CPU))
			p("     pickup (submit answered → claimed) %v", pt.Pickup)
			for _, k := range fleetCalls(pt) {
				p("     %-15s %v", k, pt.Calls[k])
			}
			p("     429s %d %v, 5xx %d", pt.Total429(), pt.Refused, pt.ServerErrors)
		}
	}
	if a := r.Artifact; a != nil {
		p("")
		p("4. Controller memory, %s artifact uploaded then downloaded (SHA-256 verified)", size(a.Bytes))
		p("   upload %.1f s (%.0f MiB/s), download %.1f s (%.0f MiB/s)", a.UploadSeconds, mib(a.Bytes)/a.UploadSeconds,
			a.DownloadSeconds, mib(a.Bytes)/a.DownloadSeconds)
		hwm := "not available"
		if a.PeakHWM > 0 {
			hwm = fmt.Sprintf("%.1f MiB", a.PeakHWM)
		}
		p("   VmRSS baseline %.1f MiB, peak of %d samples (every %.0f ms) %.1f MiB, VmHWM %s ⇒ growth %.1f MiB",
			a.BaselineRSS, a.Samples, a.RSSIntervalMS, a.PeakRSS, hwm, a.Growth)
	}
	if pg := r.Pgbench; pg != nil {
		p("")
		p("5. Postgres ceiling: lifecycle.pgbench (the same SQL, same transactions), -M %s, %.0f s per run", pg.Mode, pg.Seconds)
		if pg.Skipped != "" {
			p("   skipped: %s", pg.Skipped)
		}
		for _, run := range pg.Runs {
			c := run.CPUPerLifecycle
			p("   -c %-3d %6.0f lifecycles/s  (%.1f ms each; commits per lifecycle ≈ %.1f; CPU per lifecycle: Postgres %.2f ms + pgbench %.2f ms)%s",
				run.Clients, run.PerSecond, run.LatencyMS, run.CommitsPerLifecycle, c.Postgres, c.Bench, noisy(run.Cores))
		}
		if pg.BestPerSecond > 0 {
			p("   ceiling %.0f /s with -c %d: %s", pg.BestPerSecond, pg.BestClients, pg.Command)
		}
		if pg.Ratio > 0 {
			p("   HTTP %.0f /s ÷ ceiling %.0f /s = %.2f", r.Lifecycle.PerSecond, pg.BestPerSecond, pg.Ratio)
			if best := pg.best(); best != nil && r.Lifecycle.CPUPerLifecycle.Total() > 0 {
				p("   CPU per lifecycle, pgbench (Postgres + pgbench) %.2f ms ÷ HTTP (controller + Postgres + load generator) %.2f ms = %.2f:",
					best.CPUPerLifecycle.Total(), r.Lifecycle.CPUPerLifecycle.Total(), best.CPUPerLifecycle.Total()/r.Lifecycle.CPUPerLifecycle.Total())
				p("   the rate ratio to expect when both are CPU-bound, and much less disturbed by other load than the rates")
			}
		}
	}
	if c := r.Claim; c != nil {
		p("")
		p("6. Claim latency (a Poll(wait=0) that claims) against the queue's size")
		p("   %9d pending: %v%s", c.Small.Pending, c.Small.Latency, noisy(c.Small.Cores))
		p("   %9d pending: %v%s", c.Large.Pending, c.Large.Latency, noisy(c.Large.Cores))
		p("   bulk insert + VACUUM ANALYZE + CHECKPOINT: %.1f s; p50 ratio %.2f", c.InsertSeconds, c.Ratio)
	}

	p("")
	p("Summary")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FIGURE\tVALUE\tTARGET\tRESULT")
	for _, row := range r.Summary {
		res := "MISS"
		if row.Pass {
			res = "PASS"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", row.Name, row.Shown, row.Target, res)
	}
	return tw.Flush()
}
