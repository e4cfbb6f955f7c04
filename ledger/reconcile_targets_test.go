package ledger

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A row needs its own provider to reconcile while it is unsettled, a
// reservation's window is over and it is not released, or a fleet of an
// ephemeral provider is running; settled rows in their time do not.
func TestNeedsReconcile(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	real, ephemeral := domain.Descriptor{Name: "aws"}, domain.Descriptor{Name: "sim", Ephemeral: true}
	resv := func(state string, end time.Time) Entry {
		return Entry{Kind: KindReservation, State: state, ProviderRef: "r-1", End: end}
	}
	for _, c := range []struct {
		name string
		r    Entry
		d    domain.Descriptor
		want bool
	}{
		{"pending", Entry{Kind: KindBlock, State: StatePending}, real, true},
		{"unknown", Entry{Kind: KindFleet, State: StateUnknown}, real, true},
		{"reservation over", resv(StateActive, now), real, true},
		{"reservation scheduled, over", resv(StateScheduled, now.Add(-time.Hour)), real, true},
		{"reservation running", resv(StateActive, now.Add(time.Hour)), real, false},
		{"reservation ended", resv(StateEnded, now.Add(-time.Hour)), real, false},
		{"reservation over, no reference", Entry{Kind: KindReservation, State: StateActive, End: now.Add(-time.Hour)}, real, false},
		{"fleet of an ephemeral provider", Entry{Kind: KindFleet, State: StateActive}, ephemeral, true},
		{"fleet of a cloud", Entry{Kind: KindFleet, State: StateActive}, real, false},
		{"ended fleet of an ephemeral provider", Entry{Kind: KindFleet, State: StateEnded}, ephemeral, false},
	} {
		if got := NeedsReconcile(c.r, c.d, now); got != c.want {
			t.Errorf("%s: NeedsReconcile = %v, want %v", c.name, got, c.want)
		}
	}
}
