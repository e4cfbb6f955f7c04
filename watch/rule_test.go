package watch

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
)

// A rule's fingerprint is what the first builds computed for it: the
// state they kept (its crossings) still belongs to it.
func TestFingerprintsOfEarlierBuilds(t *testing.T) {
	below, most, pct := 18.5, 5.25, 90.0
	ck := config.Duration(30 * time.Minute)
	after := config.Duration(time.Hour)
	for _, c := range []struct {
		cond Condition
		want string
	}{
		{&SpotRule{InstanceType: "p5.48xlarge", Region: "us-west-2", Zone: "us-west-2a", BelowUSDHour: &below}, "5a5686f5eb5013af"},
		{&BlockRule{GPU: "H100", GPUs: 16, Hours: 48, StartAfter: "2026-12-03", StartBefore: "2026-12-05", MaxUSDGPUHour: &most, Regions: []string{"us-east-1"}}, "dd6a8b9ade749f89"},
		{&BucketRule{InstanceType: "p5.48xlarge", Region: "us-east-1", AtLeast: "15-20%"}, "c8cacf5ae971c3ff"},
		{&PlanRule{GPU: "H100,H200", GPUs: 16, Hours: 48, Start: "2026-12-03 09:00", Deadline: "2026-12-06", Checkpoint: &ck, OnTimePct: &pct, BelowUSD: &most}, "3d2eed3ca8efbdbc"},
		{&StartsInRule{Within: config.Duration(time.Hour), Kind: "block"}, "15d2913f6ace9c8f"},
		{&IdleRule{AbovePct: 40, After: &after, Kind: "fleet", ID: "01X"}, "3102792f3fe559e7"},
	} {
		s := Spec{Name: "r", Cond: c.cond}
		if got := Compile(s, config.Notify{}).Fingerprint; got != c.want {
			t.Errorf("%s: fingerprint %s, want %s", s.Kind(), got, c.want)
		}
	}
}
