package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

// BenchmarkEvalSnapshot is one market tick's evaluation: 20 spot and 5
// bucket rules over 2,000 pools, nothing crossing (the steady state: no
// database write).
func BenchmarkEvalSnapshot(b *testing.B) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	prices := map[domain.Pool]float64{}
	for i := range 2000 {
		p := p5(fmt.Sprintf("us-west-2-z%04d", i))
		p.Region = fmt.Sprintf("region-%02d", i%40)
		p.Interruption = &domain.Interruption{Bucket: "5-10%"}
		prices[p] = 20 + float64(i%7)
	}
	snap := snapshotOf(now, prices)
	var rules []Spec
	for i := range 20 {
		rules = append(rules, spotRule(fmt.Sprintf("s%d", i), "p5.48xlarge", fmt.Sprintf("region-%02d", i), "", 5, 0))
	}
	for i := range 5 {
		rules = append(rules, Spec{Name: fmt.Sprintf("b%d", i), Cond: &BucketRule{InstanceType: "p5.48xlarge", Region: fmt.Sprintf("region-%02d", 20+i)}})
	}
	if err := ValidateSpecs(rules, "watch", config.Notify{}); err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{State: openState(b, b.TempDir()), Now: func() time.Time { return now }, Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e.evalSnapshot(ctx, snap) // the first sight writes the buckets' baselines
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.evalSnapshot(ctx, snap)
	}
}
