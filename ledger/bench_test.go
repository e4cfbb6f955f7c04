package ledger

import (
	"fmt"
	"testing"

	"github.com/gpumarket/gpumarket/domain"
)

// BenchmarkCompute: a week of 50 fleets of 20 instances, hourly samples
// (168,000 samples).
func BenchmarkCompute(b *testing.B) {
	fr := &fakeReporter{reports: map[string]domain.UsageReport{}}
	var rows []Entry
	for i := range 50 {
		id := fmt.Sprint("f", i)
		rows = append(rows, fleet(id, 20, 2, 0, 1, StateActive))
		var ins []domain.InstanceUsage
		for j := range 20 {
			in := inst(fmt.Sprint("i", j), 0, 168, 0.6, j >= 2)
			in.InstanceType = "g6.xlarge"
			ins = append(ins, in)
		}
		fr.reports[id] = domain.UsageReport{Source: "gpu", Instances: ins}
	}
	b.ReportAllocs()
	for b.Loop() {
		compute(b, rows, fr, 0, 168, 50)
	}
}
