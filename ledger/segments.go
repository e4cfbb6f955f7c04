package ledger

import (
	"encoding/json"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// KindTrainingPlan is a SageMaker training plan's row.
const KindTrainingPlan = domain.KindTrainingPlan

// rowWindows are a training plan's segments; nil for one window.
func rowWindows(r Entry) [][2]time.Time {
	var o domain.Offering
	if r.Kind != KindFleet && json.Unmarshal(r.Request, &o) == nil && len(o.Segments) > 0 {
		out := make([][2]time.Time, 0, len(o.Segments))
		for _, s := range o.Segments {
			out = append(out, [2]time.Time{s.Start, s.End})
		}
		return out
	}
	return nil
}

// heldHours are the hours of [from, to) the windows hold; all of them for nil.
func heldHours(ws [][2]time.Time, from, to time.Time) float64 {
	if ws == nil {
		return hours(from, to)
	}
	h := 0.0
	for _, w := range ws {
		a, b := domain.Later(w[0], from), to
		if !w[1].IsZero() {
			b = domain.Earlier(w[1], to)
		}
		h += hours(a, b)
	}
	return h
}
