package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A headless watch fetches what its rules read, not the TUI's filters.
func TestWatchMarketIsTheRules(t *testing.T) {
	base := domain.Query{Providers: []string{"sim"}, GPUs: []string{"A100"}, Regions: []string{"eu-west-1"}, Window: 7 * 24 * time.Hour}
	one := 3.0
	rules := []Spec{
		{Name: "a", Cond: &SpotRule{InstanceType: "p5.48xlarge", Region: "us-west-2", BelowUSDHour: &one}},
		{Name: "b", Cond: &BucketRule{InstanceType: "Standard_ND96isr_H100_v5", Region: "eastus"}},
		{Name: "c", Cond: &SpotRule{InstanceType: "g4dn.xlarge", Region: "us-west-2", BelowUSDHour: &one}},
		{Name: "d", Cond: &BlockRule{GPU: "H200", GPUs: 8, Hours: 24}},
	}
	q, ok := MarketFor(base, rules)
	if !ok || strings.Join(q.GPUs, ",") != "H100,T4" || strings.Join(q.Regions, ",") != "us-west-2,eastus" || q.Window != time.Hour || q.Providers[0] != "sim" {
		t.Errorf("market %+v %v", q, ok)
	}
	if _, ok := MarketFor(base, rules[3:]); ok {
		t.Error("a block rule alone needs no market feed")
	}
}
