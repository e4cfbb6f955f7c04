package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/watch"
)

// A headless watch's market grows with its rules: a rule outside the
// hub it runs starts a wider one (the old one's pools kept), a rule
// inside it changes nothing, and no rule needing a market needs none.
func TestWatchMarketGrowsWithTheRules(t *testing.T) {
	s := simSettings(t, domain.Query{Providers: []string{"sim"}, Window: 24 * time.Hour})
	a := New(context.Background(), s, DefaultTable(), nil)
	defer a.Close()
	ps, err := a.Providers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := a.Market(ps)
	one := 0.01
	spot := func(it, region string) watch.Spec {
		return watch.Spec{Name: "s", Cond: &watch.SpotRule{InstanceType: it, Region: region, BelowUSDHour: &one}}
	}
	if h, err := m.For([]watch.Spec{{Name: "b", Cond: &watch.StartsInRule{}}}); h != nil || err != nil {
		t.Fatalf("no rule reads the market: %v, %v", h, err)
	}
	h1, err := m.For([]watch.Spec{spot("p5.48xlarge", "us-east-1")})
	if err != nil || h1 == nil {
		t.Fatal(err)
	}
	if h, _ := m.For([]watch.Spec{spot("p5.48xlarge", "us-east-1")}); h != h1 {
		t.Error("the same rules started another hub")
	}
	// The first rule removed as another comes: the pools of both are kept.
	h2, err := m.For([]watch.Spec{spot("g6.xlarge", "us-west-2")})
	if err != nil || h2 == h1 {
		t.Fatalf("a rule outside the market: %v, same hub %v", err, h2 == h1)
	}
	if strings.Join(m.q.GPUs, ",") != "H100,L4" || strings.Join(m.q.Regions, ",") != "us-east-1,us-west-2" {
		t.Errorf("the wider market %+v", m.q)
	}
	// The rule of the narrower market is gone: the market stays as wide.
	if h, _ := m.For([]watch.Spec{spot("g6.xlarge", "us-west-2")}); h != h2 {
		t.Error("a narrower set of rules started another hub")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := h2.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	west := false
	for _, p := range snap.Pools {
		west = west || (p.Region == "us-west-2" && p.InstanceType == "g6.xlarge")
	}
	if !west {
		t.Error("the wider hub has no g6.xlarge in us-west-2")
	}
}
