package job_test

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReview100Jobs is one review of 100 running jobs, each holding
// a fleet (the ledger's fake cloud answers at once): what a driver costs
// a minute. cpu-ms/op is the process's CPU time per review.
func BenchmarkReview100Jobs(b *testing.B) { benchReview(b, false) }

// BenchmarkReview100UnsureJobs is that review when every job's on-time
// chance is unsure (spot alone on a tight deadline): the most runs the
// chance takes.
func BenchmarkReview100UnsureJobs(b *testing.B) { benchReview(b, true) }

func benchReview(b *testing.B, unsure bool) {
	t := &testing.T{}
	w := newFakeWorld(t)
	_, svc, d := w.process(t)
	for range 100 {
		if unsure {
			w.startLive(t, svc, tightSpot())
		} else {
			w.start(t, svc)
		}
	}
	ctx := context.Background()
	if pass, err := d.Review(ctx); err != nil || pass.Active != 100 || len(pass.Errs) > 0 {
		b.Fatalf("first review: %+v %v", pass, err)
	}
	if n := len(w.fake.Launched()); n != 100 {
		b.Fatalf("%d fleets launched, want one per job", n)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		w.clk.Set(w.clk.Now().Add(time.Minute))
		if _, err := d.Review(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
