package ledger

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// FuzzDecodeUsage: whatever the usage_kept table holds (a truncated write,
// a hand edit, another version's encoding), reading it fails with an
// error or gives a report that encodes back to itself; it never panics.
func FuzzDecodeUsage(f *testing.F) {
	at := time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC)
	good, err := encodeUsage(domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{{ID: "i-1", Start: at,
		Busy: []domain.BusySample{{At: at, Period: time.Hour, Share: 0.5}, {At: at.Add(time.Hour), Period: time.Hour, Share: 1}}}}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(good), string(good[:len(good)/2]), `null`, `{"v":1,"instances":[{"id":"i","start":"2026-03-02T05:00:00Z","busy":[[0.5]]}]}`,
		`{"v":1,"instances":[{"id":"i","start":"2026-03-02T05:00:00Z","busy":[[1,2,3],[1e400]]}]}`, `{"v":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := decodeUsage(string(b))
		if err != nil {
			return
		}
		if _, err := encodeUsage(rep); err != nil {
			t.Fatalf("decoded %q, cannot encode it again: %v", b, err)
		}
	})
}
