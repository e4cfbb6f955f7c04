package cmd

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
)

// BenchmarkPriceRowsSim builds the `prices` rows of every simulated pool
// over a 7-day window (the stats walk each pool's series).
func BenchmarkPriceRowsSim(b *testing.B) {
	e, _, _ := testEnv(b, domain.Query{Window: 7 * 24 * time.Hour})
	snap, err := e.snapshotOf(context.Background(), []domain.Provider{sim.New(sim.Options{Seed: 1})}, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		rows := e.priceRows(snap)
		if len(rows) == 0 {
			b.Fatal("no rows")
		}
	}
	b.ReportMetric(float64(len(snap.Pools)), "pools")
}

// BenchmarkWriteHistory writes 100,000 history rows in each format.
func BenchmarkWriteHistory(b *testing.B) {
	rows := make([]historyRow, 100_000)
	z := "us-east-1a"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		rows[i] = historyRow{Provider: "sim", Cloud: "aws", Region: "us-east-1", Zone: &z,
			InstanceType: "p5.48xlarge", At: t0.Add(time.Duration(i) * time.Minute), USDHour: 20 + float64(i%100)/100}
	}
	for _, f := range []string{"json", "csv"} {
		b.Run(f, func(b *testing.B) {
			for b.Loop() {
				if err := writeRows(io.Discard, f, rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
		})
	}
}

// BenchmarkReadySnapshotSim is `gpumarket prices` on the simulated market
// up to its rows: the hub started over the sim, its 24 h back-fill, and
// the wait for the snapshot that says every source is done.
func BenchmarkReadySnapshotSim(b *testing.B) {
	e, _, _ := testEnv(b, domain.Query{})
	for b.Loop() {
		snap, err := e.snapshotOf(context.Background(), []domain.Provider{sim.New(sim.Options{Seed: 1})}, time.Minute)
		if err != nil || !snap.Ready {
			b.Fatal(err)
		}
	}
}
