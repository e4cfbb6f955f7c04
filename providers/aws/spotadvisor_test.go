package aws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/advisor"
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
	var pool providers.Pool
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
	p := f.provider(t, func(o *Options) { o.AdvisorURL = bad.URL })
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if c.notes[0] != "spot advisor: embedded 2025-06" {
		t.Errorf("note %q, want the embedded snapshot", c.notes[0])
	}
}
