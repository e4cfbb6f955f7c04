package ledger

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// TestTrainingPlanBookedHoursAreItsSegments: a plan's booked GPU-hours
// count its segments, not the gap between them; other rows their window.
func TestTrainingPlanBookedHoursAreItsSegments(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 11, 30, 0, 0, time.UTC)
	o := domain.Offering{Kind: domain.KindTrainingPlan, Start: t0, End: t0.Add(72 * time.Hour), Segments: []domain.Segment{
		{Start: t0, End: t0.Add(24 * time.Hour)}, {Start: t0.Add(48 * time.Hour), End: t0.Add(72 * time.Hour)}}}
	req, _ := json.Marshal(o)
	plan := Entry{Kind: KindTrainingPlan, Start: o.Start, End: o.End, Request: req}
	ws := rowWindows(plan)
	for _, c := range []struct {
		from, to time.Time
		want     float64
	}{
		{t0, t0.Add(72 * time.Hour), 48},
		{t0.Add(12 * time.Hour), t0.Add(60 * time.Hour), 24}, // 12 h of each
		{t0.Add(24 * time.Hour), t0.Add(48 * time.Hour), 0},  // the gap
	} {
		if h := heldHours(ws, c.from, c.to); math.Abs(h-c.want) > 1e-9 {
			t.Errorf("held %s to %s: %v h, want %v", c.from, c.to, h, c.want)
		}
	}
	block := Entry{Kind: KindBlock, Start: t0, End: t0.Add(72 * time.Hour), Request: json.RawMessage(`{}`)}
	if h := heldHours(rowWindows(block), t0, t0.Add(72*time.Hour)); h != 72 {
		t.Errorf("a block holds %v h of its 72", h)
	}
}
