package tui

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// fixtureProvider serves the fixture market through the real hub: pools
// and their history on the back-fill, nothing new afterwards.
type fixtureProvider struct{}

func (fixtureProvider) Name() string { return "sim" }
func (fixtureProvider) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "sim", Simulated: true}
}

func (fixtureProvider) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	if !req.Backfill {
		return nil
	}
	s := fixtureSnapshot()
	var ev domain.Event
	for _, pv := range s.Pools {
		ev.Pools = append(ev.Pools, pv.Pool)
		for at, usd := range pv.History.All() {
			ev.Points = append(ev.Points, domain.PricePoint{Pool: pv.Pool.Key(), At: time.Unix(at, 0), USDHour: usd})
		}
	}
	ev.Region = "us-east-1"
	ev.Progress = &domain.Progress{Done: 1, Total: 1}
	ev.Note = "fixture market"
	sink(ev)
	return nil
}

func startHub(t *testing.T) *feed.Hub {
	t.Helper()
	h := feed.New([]domain.Provider{fixtureProvider{}}, feed.Options{
		Query: domain.Query{Window: 24 * time.Hour}, Now: nowFn,
		Interval: func(string) time.Duration { return time.Hour }, PublishEvery: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// waitFor waits up to 10 s for the program's output to satisfy ok.
// The output is the renderer's stream, which skips cells that did not
// change: a wanted text must not share its leading cells with what was on
// screen at the same place before.
func waitFor(t *testing.T, tm *teatest.TestModel, what string, ok func(screen string) bool) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return ok(ansi.Strip(string(b))) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

// TestProgramFilterChartQuit drives the whole program over the hub: filter
// H100, chart the selection, quit.
func TestProgramFilterChartQuit(t *testing.T) {
	h := startHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(Options{Hub: h, Now: nowFn, NoColor: true, Context: ctx})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))

	waitFor(t, tm, "market", func(s string) bool { return strings.Contains(s, "NC4as_T4_v3") })
	tm.Type("/H100")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitFor(t, tm, "filtered", func(s string) bool { return strings.Contains(s, "3/9 pools") })
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitFor(t, tm, "chart", func(s string) bool { return strings.Contains(s, "min/max per column") })
	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))

	final := tm.FinalModel(t).(*Model)
	if final.views[final.active] != chartOf(final) {
		t.Fatalf("final view %s, want Chart", final.views[final.active].Title())
	}
	// The charted pool is the filtered list's first; its key names the
	// instance type, not the GPU (p5.48xlarge), so look the GPU up.
	if len(chartOf(final).poolKeys) != 1 || len(final.market.list) == 0 || final.market.row(0).Key != chartOf(final).poolKeys[0] ||
		final.market.row(0).GPU.Model != "H100" {
		t.Errorf("charted %v, want the first H100 pool of the filtered list", chartOf(final).poolKeys)
	}
	out := ansi.Strip(final.View().Content)
	charted := "H100"
	if len(final.market.list) > 0 {
		charted = final.market.row(0).InstanceType // the legend names the type
	}
	for _, want := range []string{"Sun 14:00", "Mon 14:00", charted, "/GPU-h", "┤", "SIMULATED MARKET"} {
		if !strings.Contains(out, want) {
			t.Errorf("final chart lacks %q:\n%s", want, out)
		}
	}
	for _, r := range shownRows(final.market) {
		if r.GPU.Model != "H100" {
			t.Errorf("filter let %s through", r.Key)
		}
	}
}

// TestProgramMarkedChartAndSubscriptionEnds marks two pools, charts both,
// and checks that ending the session's context ends its subscription.
func TestProgramMarkedChartAndSubscriptionEnds(t *testing.T) {
	h := startHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := New(Options{Hub: h, Now: nowFn, NoColor: true, Context: ctx})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	// A row's text, not the status line's "9/9 pools": the renderer
	// rewrites only the cells of "0/0" that change.
	waitFor(t, tm, "market", func(s string) bool { return strings.Contains(s, "ap-northeast-1a") })
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitFor(t, tm, "legend", func(s string) bool { return strings.Contains(s, "1─") && strings.Contains(s, "2•") })
	if h.Subscribers() != 1 {
		t.Errorf("%d subscribers, want 1", h.Subscribers())
	}
	tm.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for h.Subscribers() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after the session ended", n)
	}
}

// TestRunQuitsCleanly runs Run itself on a fake terminal: q exits with nil
// and the alternate screen is left.
func TestRunQuitsCleanly(t *testing.T) {
	h := startHub(t)
	in := &slowReader{data: []byte("q"), after: 200 * time.Millisecond}
	var out bytes.Buffer
	err := Run(context.Background(), Options{Hub: h, Now: nowFn, NoColor: true},
		tea.WithInput(in), tea.WithOutput(&out), tea.WithWindowSize(80, 24), tea.WithoutSignals())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := out.String()
	if !strings.Contains(s, "\x1b[?1049h") || !strings.Contains(s, "\x1b[?1049l") {
		t.Errorf("alternate screen not entered and left: %q", s[max(0, len(s)-200):])
	}
}

func TestRunEndsWithContext(t *testing.T) {
	h := startHub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{Hub: h, Now: nowFn}, tea.WithInput(&slowReader{after: time.Hour}),
		tea.WithOutput(&out), tea.WithWindowSize(80, 24), tea.WithoutSignals())
	if err != nil {
		t.Fatalf("Run after the context ended: %v", err)
	}
}

// slowReader gives its data after a pause, then blocks as a terminal does.
type slowReader struct {
	data  []byte
	after time.Duration
	sent  bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.sent {
		time.Sleep(time.Hour)
		return 0, io.EOF
	}
	time.Sleep(r.after)
	r.sent = true
	return copy(p, r.data), nil
}
