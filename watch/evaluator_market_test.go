package watch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// A rule added to the rules file while the watch runs, on a pool outside
// the market it fetched at start, never fired ("no pool … in this run's
// market" until a restart). The evaluator asks for the market its rules
// read and follows the new hub; the rule fires.
func TestRuleAddedWhileRunningGetsItsMarket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RulesFileName)
	m := sim.New(sim.Options{Seed: 1})
	base := domain.Query{Providers: []string{sim.Name}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var mu sync.Mutex
	var asked []domain.Query
	var last *feed.Hub
	market := func(rules []Spec) (*feed.Hub, error) {
		q, _ := MarketFor(base, rules)
		mu.Lock()
		defer mu.Unlock()
		if n := len(asked); n > 0 && strings.Join(asked[n-1].Regions, ",") == strings.Join(q.Regions, ",") {
			return last, nil
		}
		asked = append(asked, q)
		h := feed.New([]domain.Provider{m}, feed.Options{Query: q, PublishEvery: 5 * time.Millisecond})
		wg.Add(1)
		go func() { defer wg.Done(); h.Run(ctx) }()
		last = h
		return h, nil
	}
	rules := validRules(t, config.Notify{}, spotRule("never", "p5.48xlarge", "us-east-1", "", 0.01, 0))
	h, _ := market(rules)
	e, err := New(Options{State: openState(t, dir), Hub: h, Market: market, Rules: rules, RulesFile: path, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.Run(ctx) }()

	if err := os.WriteFile(path, []byte("watch:\n  - name: l4-west\n    spot: {instance_type: g6.xlarge, region: us-west-2, above_usd_hour: 0.01}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new rule's alert", func() bool { return len(e.Alerts(0)) == 1 })
	a := e.Alerts(0)[0]
	if a.Rule != "l4-west" || *a.Region != "us-west-2" || !strings.Contains(a.Text, "g6.xlarge") {
		t.Fatalf("alert %+v", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !strings.Contains(strings.Join(asked[1].Regions, ","), "us-west-2") || !strings.Contains(strings.Join(asked[1].GPUs, ","), "L4") {
		t.Fatalf("markets asked %+v; want the start's, then one with L4 in us-west-2", asked)
	}
	for _, r := range e.Rules() {
		if r.Name == "l4-west" && r.Note != "" {
			t.Errorf("the rule still says %q", r.Note)
		}
	}
}
