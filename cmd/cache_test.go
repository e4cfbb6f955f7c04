package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
)

// awsSession points the AWS provider at a local EC2 endpoint serving 8
// days of hourly history of two regions. While slow is set, each price
// history page is answered 300 ms late.
func awsSession(t *testing.T) (*session, *ec2test.Server, *atomic.Bool, string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1", "us-west-2"}, now.Add(-8*24*time.Hour), now, time.Hour)...)
	var slow atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() && r.Method == http.MethodPost {
			if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == "DescribeSpotPriceHistory" {
				time.Sleep(300 * time.Millisecond)
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s := newSession(t, "")
	dataDir := os.Getenv("GPUMARKET_DATA_DIR")
	testutil.AWSEnv(t, srv.URL)
	return s, fake, &slow, dataDir
}

// historyCalls returns the StartTime of every DescribeSpotPriceHistory
// call after the first skip calls.
func historyCalls(fake *ec2test.Server, skip int) []string {
	var out []string
	n := 0
	for _, c := range fake.Calls() {
		if c.Action != "DescribeSpotPriceHistory" {
			continue
		}
		if n++; n > skip {
			out = append(out, c.Region+" "+c.Params.Get("StartTime"))
		}
	}
	return out
}

// TestWarmCacheAsksOnlyFromItsEnd: the
// history cache, against the local EC2 endpoint: the first start
// back-fills the window (several pages a region, from the window's
// start); the second start's first snapshot already shows the cached
// history, and it asks the cloud only from the cached end: one live-poll
// page a region. A third start, by the CLI, prints the same pools and
// window figures as the first.
func TestWarmCacheAsksOnlyFromItsEnd(t *testing.T) {
	s, fake, slow, dataDir := awsSession(t)
	args := []string{"prices", "--provider", "aws", "--region", "us-east-1,us-west-2", "--window", "7d", "-o", "json"}
	start := time.Now()
	code, out1, errOut := s.run(args...)
	if code != 0 {
		t.Fatalf("first start: exit %d: %s", code, errOut)
	}
	// The command takes its window from its own clock, at some moment
	// between start and done: a loaded machine can put seconds between.
	done := time.Now()
	first := historyCalls(fake, 0)
	if len(first) < 6 {
		t.Fatalf("first start sent %d history calls, want the window's pages (3 a region at least): %v", len(first), first)
	}
	for _, c := range first {
		at, err := time.Parse(time.RFC3339, strings.Fields(c)[1])
		if err != nil || at.Before(start.Add(-7*24*time.Hour-time.Second)) || at.After(done.Add(-7*24*time.Hour+time.Second)) {
			t.Fatalf("first start asked %s, want the window's start (%s to %s)", c, start.Add(-7*24*time.Hour).UTC(), done.Add(-7*24*time.Hour).UTC())
		}
	}
	info, err := feed.Stat(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Regions) != 2 || info.Points == 0 || len(info.Regions[0].Spans) != 1 {
		t.Fatalf("cache after the first start: %+v", info)
	}
	cachedFrom := info.Regions[0].Spans[0].From
	cachedEnd := info.Regions[0].Spans[0].Until
	if u := info.Regions[1].Spans[0].Until; u.Before(cachedEnd) {
		cachedEnd = u
	}

	// Second start, as the TUI starts: the app, its hub, a subscriber.
	slow.Store(true)
	cfg := config.Default()
	cfg.ApplyEnv(os.Getenv)
	e, _, errBuf := testEnv(t, domain.Query{Providers: []string{"aws"}, Regions: []string{"us-east-1", "us-west-2"}, Window: 7 * 24 * time.Hour})
	e.Config, e.DataDir = cfg, dataDir
	a := newCLI().appOf(context.Background(), e)
	defer a.Close()
	h, err := a.Hub(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap := <-h.Subscribe(ctx)
	if snap.Ready {
		t.Fatal("the first snapshot is ready: the test wanted it before the gap's pages came")
	}
	rows1, _ := jsonRows(t, out1)
	if len(snap.Pools) != len(rows1) {
		t.Fatalf("first snapshot: %d pools, want the %d cached", len(snap.Pools), len(rows1))
	}
	for _, r := range rows1 {
		key := r["provider"].(string) + "/" + r["region"].(string) + "/" + r["zone"].(string) + "/" + r["instance_type"].(string)
		pv, ok := snap.Pool(key)
		if !ok || pv.History.Len() < 7*24 {
			t.Fatalf("first snapshot: %s has %d points, want the cached week", key, pv.History.Len())
		}
		if _, usd, _ := pv.History.Last(); usd != r["spot_usd_hour"].(float64) {
			t.Errorf("first snapshot: %s last price %v, want %v", key, usd, r["spot_usd_hour"])
		}
		if pv.OnDemandUSDHour == nil || *pv.OnDemandUSDHour != r["on_demand_usd_hour"].(float64) {
			t.Errorf("first snapshot: %s on-demand %v, want the cached description's %v", key, pv.OnDemandUSDHour, r["on_demand_usd_hour"])
		}
	}
	if _, err := a.Ready(context.Background(), h, time.Minute, false, nil); err != nil {
		t.Fatalf("second start: %v (%s)", err, errBuf)
	}
	second := historyCalls(fake, len(first))
	// The SDK sends the time to the millisecond.
	want := cachedEnd.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
	sort.Strings(second)
	if len(second) != 2 || second[0] != "us-east-1 "+want || second[1] != "us-west-2 "+want {
		t.Fatalf("second start's history calls %v, want one a region from the cached end %s", second, want)
	}
	// A live poll: its span joins the cached history's, which stays whole.
	polled := time.Now()
	h.Refresh()
	for s := range h.Subscribe(ctx) {
		if st, _ := s.Source("aws"); st.LastOK.After(polled) {
			break
		}
	}
	a.Close()
	info, err = feed.Stat(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range info.Regions {
		if len(r.Spans) != 1 || !r.Spans[0].From.Equal(cachedFrom) || !r.Spans[0].Until.After(polled) {
			t.Fatalf("%s's span after a live poll: %+v, want it from %s to after %s", r.Region, r.Spans, cachedFrom, polled)
		}
	}
	second = historyCalls(fake, len(first))

	// Third start, by the CLI: the same pools and figures.
	slow.Store(false)
	code, out3, errOut := s.run(args...)
	if code != 0 {
		t.Fatalf("third start: exit %d: %s", code, errOut)
	}
	third := historyCalls(fake, len(first)+len(second))
	if len(third) != 2 {
		t.Fatalf("third start's history calls %v, want one a region", third)
	}
	rows3, _ := jsonRows(t, out3)
	if len(rows3) != len(rows1) {
		t.Fatalf("third start: %d rows, first %d", len(rows3), len(rows1))
	}
	byKey := map[string]map[string]any{}
	for _, r := range rows1 {
		byKey[r["region"].(string)+r["zone"].(string)+r["instance_type"].(string)] = r
	}
	for _, r := range rows3 {
		r1 := byKey[r["region"].(string)+r["zone"].(string)+r["instance_type"].(string)]
		for _, f := range []string{"spot_usd_hour", "window_min_usd_hour", "window_max_usd_hour", "on_demand_usd_hour", "interruption", "placement_score"} {
			if r1 == nil || r[f] != r1[f] {
				t.Errorf("third start: %s %s = %v, first start %v", r["instance_type"], f, r[f], r1[f])
			}
		}
	}
}

// A history.db that is garbage is reported in one warning line, moved
// aside, and the window fetched afresh; the ledger is not touched.
func TestCorruptCacheWarnsAndFetchesAfresh(t *testing.T) {
	s, fake, _, dataDir := awsSession(t)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ledgerBytes, _ := os.ReadFile(filepath.Join(dataDir, ledger.FileName))
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096)
	if err := os.WriteFile(feed.Path(dataDir), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := s.run("prices", "--provider", "aws", "--region", "us-east-1", "--window", "24h", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var warnings []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if strings.Contains(l, "history.db") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "gpumarket: warning: ") || !strings.Contains(warnings[0], "history cache not used: "+feed.Path(dataDir)+" is not a SQLite database") ||
		!strings.Contains(warnings[0], "moved it to "+feed.Path(dataDir)+".corrupt-") {
		t.Fatalf("warnings = %q", warnings)
	}
	aside, _ := filepath.Glob(feed.Path(dataDir) + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); !bytes.Equal(b, garbage) {
		t.Error("the file moved aside is not the garbage found")
	}
	if n := len(historyCalls(fake, 0)); n < 1 {
		t.Fatal("nothing fetched")
	}
	if b, _ := os.ReadFile(filepath.Join(dataDir, ledger.FileName)); !bytes.Equal(b, ledgerBytes) {
		t.Error("the ledger changed")
	}
	info, err := feed.Stat(context.Background(), dataDir)
	if err != nil || info.Points == 0 {
		t.Fatalf("the fresh cache: %+v, %v", info, err)
	}
}

// cache info prints the file, size and what each region holds (table and
// json); cache clear removes it and says what, and leaves the ledger.
func TestCacheInfoAndClear(t *testing.T) {
	s, _, _, dataDir := awsSession(t)
	st, err := ledger.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if code, out, _ := s.run("cache", "info"); code != 0 || !strings.Contains(out, "no history cache at "+feed.Path(dataDir)) {
		t.Fatalf("info with no cache: exit %d %q", code, out)
	}
	if code, out, errOut := s.run("cache", "info", "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" || !strings.Contains(errOut, "no history cache") {
		t.Fatalf("info -o json with no cache: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := s.run("prices", "--provider", "aws", "--region", "us-east-1,us-west-2", "--gpu", "H100", "-o", "json"); code != 0 {
		t.Fatalf("prices: %d %s", code, errOut)
	}
	code, out, errOut := s.run("cache", "info")
	if code != 0 {
		t.Fatalf("info: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "history cache "+feed.Path(dataDir)+": ") || !strings.Contains(lines[0], "6 pools") ||
		!strings.Contains(lines[0], "retention 90d") || !strings.Contains(lines[1], "PROVIDER") || !strings.Contains(lines[2], "us-east-1") || !strings.Contains(lines[2], "H100") {
		t.Fatalf("info table:\n%s", out)
	}
	code, out, errOut = s.run("cache", "info", "-o", "json")
	if code != 0 || !strings.Contains(errOut, "history cache ") {
		t.Fatalf("info json: exit %d %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("info json: %v\n%s", err, out)
	}
	r := rows[0]
	if r["file"] != feed.Path(dataDir) || r["size_bytes"].(float64) <= 0 || r["provider"] != "aws" || r["region"] != "us-east-1" ||
		r["gpus"] != "H100" || r["pools"] != 3.0 || r["points"].(float64) < 3 || r["from"] == nil || r["until"] == nil {
		t.Fatalf("info row %v", r)
	}

	code, out, errOut = s.run("cache", "clear")
	if code != 0 || !strings.HasPrefix(out, "removed "+feed.Path(dataDir)+" (") || !strings.Contains(out, "6 pools") {
		t.Fatalf("clear: exit %d %q %s", code, out, errOut)
	}
	if _, err := os.Stat(feed.Path(dataDir)); !os.IsNotExist(err) {
		t.Fatalf("the cache is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, ledger.FileName)); err != nil {
		t.Fatalf("the ledger is gone: %v", err)
	}
	if code, out, _ := s.run("cache", "clear"); code != 0 || !strings.Contains(out, "nothing removed") {
		t.Fatalf("clear again: exit %d %q", code, out)
	}
	if code, _, errOut := s.run("cache"); code != 2 || !strings.Contains(errOut, "info or clear") {
		t.Fatalf("cache alone: exit %d %q", code, errOut)
	}
	// A file that is not a cache: info says so (exit 1) and leaves it.
	os.WriteFile(feed.Path(dataDir), []byte(strings.Repeat("not sqlite ", 100)), 0o600)
	if code, _, errOut := s.run("cache", "info"); code != 1 || !strings.Contains(errOut, "history cache "+feed.Path(dataDir)+" is not a SQLite database") || !strings.Contains(errOut, "cache clear") {
		t.Fatalf("info of garbage: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(feed.Path(dataDir)); err != nil {
		t.Fatal("info moved the file")
	}
}

// With a warm cache and an endpoint that refuses connections, `prices`
// prints the cached rows with their age: cached and as_of in JSON,
// "cached HH:MM" in the table, and a warning naming the cache file.
func TestPricesFromTheCacheSayTheirAge(t *testing.T) {
	s, _, _, dataDir := awsSession(t)
	args := []string{"prices", "--provider", "aws", "--region", "us-east-1", "--window", "1d"}
	code, out, errOut := s.run(append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("warming the cache: exit %d: %s", code, errOut)
	}
	warm, _ := jsonRows(t, out)
	info, err := feed.Stat(context.Background(), dataDir)
	if err != nil || len(info.Regions) != 1 {
		t.Fatalf("cache: %+v, %v", info, err)
	}
	cachedAt := info.Regions[0].Spans[0].Until
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	t.Setenv("AWS_ENDPOINT_URL", refused.URL)
	t.Setenv("AWS_ENDPOINT_URL_EC2", refused.URL)
	t.Setenv("GPUMARKET_AWS_ADVISOR_URL", refused.URL+"/spot-advisor-data.json")

	code, out, errOut = s.run(append(args, "-o", "json", "--timeout", "30s")...)
	if code != 0 {
		t.Fatalf("unreachable endpoint with a warm cache: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != len(warm) || len(rows) == 0 {
		t.Fatalf("%d rows from the cache, want the %d cached", len(rows), len(warm))
	}
	for _, r := range rows {
		at, _ := time.Parse(time.RFC3339, fmt.Sprint(r["as_of"]))
		if r["cached"] != true || !at.Equal(cachedAt.Truncate(time.Second)) {
			t.Fatalf("row %s: cached %v as_of %v; want cached as of %s", r["instance_type"], r["cached"], r["as_of"], cachedAt)
		}
	}
	if !strings.Contains(errOut, "cached prices as of "+cachedAt.Local().Format("2006-01-02 15:04")) || !strings.Contains(errOut, feed.Path(dataDir)) {
		t.Fatalf("warning %q does not say the rows are cached, when, and from which file (%s)", errOut, feed.Path(dataDir))
	}
	code, table, _ := s.run(append(args, "--timeout", "30s")...)
	if code != 0 || !strings.Contains(table, "AS_OF") || !strings.Contains(table, "cached "+cachedAt.Local().Format("15:04")) {
		t.Fatalf("table (exit %d) does not say cached %s:\n%s", code, cachedAt.Local().Format("15:04"), table)
	}
}
