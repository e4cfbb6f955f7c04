package watch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// fakeLedger is a LedgerReader over rows the test sets.
type fakeLedger struct {
	mu   sync.Mutex
	rows []ledger.Entry
}

func (l *fakeLedger) List(_ context.Context, states ...string) ([]ledger.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ledger.Entry
	for _, r := range l.rows {
		for _, s := range states {
			if r.State == s {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (l *fakeLedger) add(r ledger.Entry) {
	l.mu.Lock()
	l.rows = append(l.rows, r)
	l.mu.Unlock()
}

func TestStartsInTellsEachBookedRowOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	start := t0.Add(90 * time.Minute) // 11:30 UTC, as AWS blocks start
	l := &fakeLedger{rows: []ledger.Entry{
		{ID: "01A", Kind: ledger.KindBlock, Provider: "sim", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge", InstanceCount: 2, GPUCount: 16, Start: start, End: start.Add(48 * time.Hour), State: ledger.StateScheduled},
		{ID: "01B", Kind: ledger.KindReservation, Provider: "sim", Region: "eastus", InstanceType: "Standard_ND96isr_H100_v5", InstanceCount: 1, Start: start.Add(-10 * time.Minute), State: ledger.StateScheduled},
		{ID: "01C", Kind: ledger.KindBlock, Provider: "sim", Start: start, State: ledger.StateFailed},
		// A fleet scheduled with launch --start starts at a set time too.
		{ID: "01D", Kind: ledger.KindFleet, Provider: "sim", Region: "us-east-1", InstanceType: "g6.xlarge", InstanceCount: 4, Start: start.Add(5 * time.Minute), State: ledger.StateScheduled},
	}}
	rules := validRules(t, config.Notify{},
		Spec{Name: "soon", Cond: &StartsInRule{Within: config.Duration(time.Hour)}},
		Spec{Name: "blocks", Cond: &StartsInRule{Within: config.Duration(2 * time.Hour), Kind: ledger.KindBlock}})
	e := newEvaluator(t, Options{Ledger: l, Now: clk.Now, Rules: rules,
		Describe: func(string) domain.Descriptor { return domain.Descriptor{Simulated: true} }})
	ctx := context.Background()
	byRule := func() map[string][]Alert {
		m := map[string][]Alert{}
		for _, a := range e.Alerts(0) {
			m[a.Rule] = append(m[a.Rule], a)
		}
		return m
	}
	e.tick(ctx, false)
	if got := byRule(); len(got["soon"]) != 0 || len(got["blocks"]) != 1 || strings.Join(got["blocks"][0].LedgerIDs, ",") != "01A" {
		t.Fatalf("at 10:00: %+v, want only the block rule (within 2h) for 01A", got)
	}
	clk.Set(t0.Add(35 * time.Minute)) // 10:35: both rows within the hour
	e.tick(ctx, false)
	e.tick(ctx, false)
	got := byRule()
	if len(got["soon"]) != 1 || strings.Join(got["soon"][0].LedgerIDs, ",") != "01A,01B,01D" || len(got["blocks"]) != 1 {
		t.Fatalf("at 10:35: %+v, want one alert for 01A, 01B and the scheduled fleet 01D", got)
	}
	a := got["soon"][0]
	if !a.Simulated || !strings.Contains(a.Text, "block 01A 2 × p5.48xlarge in us-east-1a starts Thu 2026-12-03 11:30 UTC (in 55m)") ||
		!strings.Contains(a.Text, "fleet 01D 4 × g6.xlarge in us-east-1 starts Thu 2026-12-03 11:35 UTC (in 1h)") {
		t.Errorf("text %q", a.Text)
	}
	// A row booked later is told on its own, at once (no cooldown).
	l.add(ledger.Entry{ID: "01E", Kind: ledger.KindBlock, Provider: "sim", Start: t0.Add(80 * time.Minute), State: ledger.StateScheduled})
	e.tick(ctx, false)
	if got := byRule(); len(got["soon"]) != 2 || strings.Join(got["soon"][1].LedgerIDs, ",") != "01E" || len(got["blocks"]) != 2 {
		t.Fatalf("after 01E was booked: %+v", got)
	}
	// Once they have started, nothing more, and the memo forgets them.
	clk.Set(t0.Add(3 * time.Hour))
	e.tick(ctx, false)
	if n := len(e.Alerts(0)); n != 4 {
		t.Errorf("%d alerts, want 4", n)
	}
	if st, _ := e.opt.State.Load(ctx, "soon", e.Rules()[0].Fingerprint); len(st.Memo) != 0 {
		t.Errorf("memo %s, want empty once the rows started", st.Memo)
	}
}
