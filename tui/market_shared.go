package tui

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// Shared is what the sessions of one process derive from the market once
// for all of them: the Market view's rows of each snapshot, window and job.
// A session keeps only its own cursor, filters, sort and marks, as indices
// over the shared rows. Build one per process (NewShared) and give it to
// every session's Options; it is safe for concurrent use.
type Shared struct {
	mu sync.Mutex
	// latest is the newest rows of each window and job; older ones are
	// kept only by the sessions still showing them.
	latest map[rowsKind]*marketRows
	nextID uint64
}

// NewShared returns an empty cache for the sessions of one process.
func NewShared() *Shared {
	return &Shared{latest: map[rowsKind]*marketRows{}}
}

// rowsKind is what, besides the snapshot, the rows depend on.
type rowsKind struct {
	window time.Duration
	eff    string // the job's basis, printed: Basis holds a map
}

// marketRows are the rows of one snapshot, window and job, in snapshot
// order. Never written after they are made (see row.shown).
type marketRows struct {
	id   uint64
	snap *feed.Snapshot
	kind rowsKind
	eff  planner.Basis
	rows []*row
	// byKey is the index of each pool's row.
	byKey map[string]int32
	// prevID is the rows these were made from; when sameLayout, the same
	// index is the same pool in both, and changed are the indices of the
	// rows derived again: a session showing prevID moves only those.
	prevID     uint64
	sameLayout bool
	changed    []int32
	// rewindowed is set when rows were moved to another window.
	rewindowed bool
}

func effKey(b planner.Basis) string { return fmt.Sprintf("%+v", b) }

// rows returns the rows of snapshot s over the window for the job eff.
// from and to are the window's span, used for the pools derived now; have
// is what the asking session shows, the base when nothing shared fits.
func (sh *Shared) rows(s *feed.Snapshot, window time.Duration, eff planner.Basis, ek string, from, to int64, have *marketRows) *marketRows {
	kind := rowsKind{window: window, eff: ek}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	base := sh.latest[kind]
	if base != nil && base.snap == s {
		return base
	}
	if base == nil && have != nil && have.kind.eff == ek {
		base = have
	}
	sh.nextID++
	rs := buildRows(sh.nextID, s, kind, eff, from, to, base)
	sh.latest[kind] = rs
	// Windows nobody moved to the newest snapshot are dropped from the
	// cache; a session still on one keeps its own reference.
	for k, o := range sh.latest {
		if o.snap.Seq+2 < s.Seq {
			delete(sh.latest, k)
		}
	}
	return rs
}

// buildRows derives the rows of s, taking from base (an earlier snapshot's
// rows, or the same snapshot's over another window) every pool that did
// not change.
func buildRows(id uint64, s *feed.Snapshot, kind rowsKind, eff planner.Basis, from, to int64, base *marketRows) *marketRows {
	rs := &marketRows{id: id, snap: s, kind: kind, eff: eff, rows: make([]*row, len(s.Pools))}
	sameLayout := base != nil && len(base.rows) == len(s.Pools)
	sameWindow := base != nil && base.kind.window == kind.window
	windowedSort := slices.ContainsFunc(present.Sorts, func(c *present.Column) bool { return c.Windowed })
	for i := range s.Pools {
		pv := &s.Pools[i]
		var old *row
		if base != nil {
			if i < len(base.rows) && base.rows[i].Key == pv.Key {
				old = base.rows[i]
			} else if j, ok := base.byKey[pv.Key]; ok {
				old = base.rows[j]
			}
		}
		if old == nil || i >= len(base.rows) || old != base.rows[i] {
			sameLayout = false
		}
		var r *row
		switch {
		case old == nil || old.derived != pv.Changed:
			r = derive(pv, eff, from, to)
			rs.changed = append(rs.changed, int32(i))
		case sameWindow:
			r = old
		default:
			r = old.rewindow(from, to)
		}
		if windowedSort {
			// A windowed sort reads the window's figures: made here, once,
			// so that no session fills them in a shared row.
			r.Window()
		}
		rs.rows[i] = r
	}
	if sameLayout {
		rs.byKey = base.byKey
	} else {
		rs.byKey = make(map[string]int32, len(rs.rows))
		for i := range rs.rows {
			rs.byKey[rs.rows[i].Key] = int32(i)
		}
	}
	if base != nil {
		rs.prevID, rs.sameLayout, rs.rewindowed = base.id, sameLayout, !sameWindow
	}
	return rs
}
