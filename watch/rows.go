package watch

import (
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// rowsWhat says which of the ledger's rows a rule watches.
func rowsWhat(all, ofKind, kind, id string) string {
	switch {
	case id != "":
		return "ledger row " + id
	case kind != "":
		return ofKind + kind
	}
	return all
}

// checkRowKind refuses a kind of row gpumarket does not book.
func checkRowKind(kind, fleet string) error {
	if kind != "" && kind != domain.KindBlock && kind != domain.KindReservation && kind != domain.KindFleet {
		return ruleErr("kind", "%q; want %s, %s or %s%s, or none for all three", kind, domain.KindBlock, domain.KindReservation, domain.KindFleet, fleet)
	}
	return nil
}

// tellRows tells the rows of due not told yet, at most once per cooldown; a
// told row stays told while it is in still. The memo keeps the told rows.
func tellRows[T any](now time.Time, cooldown time.Duration, still []string, due []T, id func(T) string, alert func([]T) *Alert) func(*ruleState) *Alert {
	return func(st *ruleState) *Alert {
		var told, keep []string
		if len(st.Memo) > 0 {
			json.Unmarshal(st.Memo, &told)
		}
		for _, t := range told {
			if slices.Contains(still, t) {
				keep = append(keep, t)
			}
		}
		var news []T
		for _, row := range due {
			if !slices.Contains(keep, id(row)) {
				news = append(news, row)
			}
		}
		var a *Alert
		if len(news) > 0 && (st.LastFired.IsZero() || now.Sub(st.LastFired) >= cooldown) {
			a = alert(news)
			for _, row := range news {
				keep = append(keep, id(row))
			}
			st.LastFired = now
		}
		sort.Strings(keep)
		st.Memo = nil
		if len(keep) > 0 {
			st.Memo, _ = json.Marshal(keep)
		}
		return a
	}
}
