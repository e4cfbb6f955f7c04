package aws

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

func TestAdvisorLiveThenCached(t *testing.T) {
	var hits atomic.Int32
	adv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write(advisor.RawEmbedded())
	}))
	defer adv.Close()
	f := newFixture(t)
	clock := testNow
	p := f.provider(t, func(o *Options) { o.AdvisorURL = adv.URL; o.Now = func() time.Time { return clock } })
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if c.notes[0] != "spot advisor: live, fetched just now" {
		t.Errorf("note %q", c.notes[0])
	}
	var pool domain.Pool
	for _, pl := range c.pools {
		if pl.Interruption != nil {
			pool = pl
		}
	}
	if pool.Interruption == nil || !strings.Contains(pool.Interruption.Source, "live") || !pool.Interruption.AsOf.Equal(testNow) {
		t.Errorf("interruption %+v, want the live data's", pool.Interruption)
	}
	// 12 minutes later a new provider on the same data dir uses the
	// cached file and says how old it is.
	clock = testNow.Add(12 * time.Minute)
	p2 := f.provider(t, func(o *Options) {
		o.AdvisorURL, o.DataDir = adv.URL, p.opt.DataDir
		o.Now = func() time.Time { return clock }
	})
	c2 := newCollector()
	if err := p2.Fetch(context.Background(), backfill(time.Hour), c2.sink); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d live fetches, want 1", hits.Load())
	}
	// The cached file's age is its modification time; it was written
	// just now by the wall clock, so only the prefix is certain.
	if !strings.HasPrefix(c2.notes[0], "spot advisor: live, fetched ") {
		t.Errorf("note %q", c2.notes[0])
	}
}

func TestAdvisorFailureFallsBackToEmbedded(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ranges": [], "spot_advisor": {}}`))
	}))
	defer bad.Close()
	f := newFixture(t)
	var log testutil.Buffer
	p := f.provider(t, func(o *Options) {
		o.AdvisorURL = bad.URL
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if len(c.notes) == 0 || !strings.HasPrefix(c.notes[0], "spot advisor: embedded 2025-06 (live fetch failed: ") {
		t.Errorf("notes %q, want the embedded snapshot and why", c.notes)
	}
}

// TestAdvisorFallbackIsOneLine: when the live advisor
// file cannot be had, the user is told once, in the source's note (which
// cmd prints as one line), not also by a warning in the log (which cmd
// prints on stderr too).
func TestAdvisorFallbackIsOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/spot-advisor-data.json"
	l.Close()
	f := newFixture(t)
	var log testutil.Buffer
	p := f.provider(t, func(o *Options) {
		o.AdvisorURL = closed
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	want := "spot advisor: embedded 2025-06 (live fetch failed: connection refused)"
	notes := map[string]bool{}
	for _, n := range c.notes {
		notes[n] = true
	}
	if len(notes) != 1 || !notes[want] {
		t.Errorf("notes %q, want only %q", c.notes, want)
	}
	if log.String() != "" {
		t.Errorf("warnings logged beside the note: %s", log.String())
	}
	// The next fetch, within the hour before the next try, says the same.
	c2 := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c2.sink); err != nil {
		t.Fatal(err)
	}
	if len(c2.notes) == 0 || c2.notes[0] != want {
		t.Errorf("next fetch's notes %q, want %q", c2.notes, want)
	}
}
