package tui

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// Shared derives the Market's rows once per process for every session, which
// keeps only its cursor, filters, sort and marks; safe for concurrent use.
type Shared struct {
	mu sync.Mutex
	// latest is the newest rows of each window and job.
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

// marketRows are one snapshot's rows for a window and job, immutable.
type marketRows struct {
	id   uint64
	snap *feed.Snapshot
	kind rowsKind
	eff  planner.Basis
	rows []*row
	// byKey is the index of each pool's row.
	byKey map[string]int32
	// prevID is the rows these came from; when sameLayout, changed are the
	// indices derived again, all a session on prevID moves.
	prevID     uint64
	sameLayout bool
	changed    []int32
	// rewindowed is set when rows were moved to another window.
	rewindowed bool
}

func effKey(b planner.Basis) string { return fmt.Sprintf("%+v", b) }

// rows returns s's rows over the window for eff; have is the session's own,
// the base when nothing shared fits.
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
	// Windows not moved to the newest snapshot leave the cache.
	for k, o := range sh.latest {
		if o.snap.Seq+2 < s.Seq {
			delete(sh.latest, k)
		}
	}
	return rs
}

// buildRows derives s's rows, reusing base's for pools that did not change.
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
			// A windowed sort's figures are made here once, not in a shared row.
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

// gutter is the cursor, mark and restricted columns; the cursor has a glyph.
const gutter = 3

// row is one pool of the Market: figures and present.View's cells. Rows are
// shared by sessions and immutable once made, but for shown (same cells).
type row struct {
	// Row's PoolView is the row's own copy, so no old snapshot is kept alive.
	present.Row
	derived uint64 // the pool's Changed when it was derived

	// cells omit the windowed ones (the trend), made only for rows on screen.
	cells  []string
	search string // lowercased text the `/` filter matches
	// shown is cells with the windowed ones; nil until on someone's screen.
	shown atomic.Pointer[[]string]
}

// derive makes pv's row over [from, to] for eff, windowed cells aside.
func derive(pv *feed.PoolView, eff planner.Basis, from, to int64) *row {
	own := new(feed.PoolView)
	*own = *pv
	r := &row{Row: present.Derive(own, eff, from, to), derived: pv.Changed, cells: make([]string, len(present.View))}
	for i, col := range present.View {
		if !col.Windowed {
			r.cells[i] = col.Cell(&r.Row)
		}
	}
	// The place as REGION/ZONE shows it: what is on screen is what / finds.
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, present.Place(pv.Region, pv.Zone),
		pv.Provider, string(pv.Cloud)}, " "))
	return r
}

// rewindow moves the row to [from, to], keeping what does not read it.
func (r *row) rewindow(from, to int64) *row {
	n := &row{Row: r.Row, derived: r.derived, cells: r.cells, search: r.search}
	n.SetWindow(from, to)
	return n
}

// cellsShown makes the windowed cells for a shown row; racing sessions
// make the same cells.
func (r *row) cellsShown() []string {
	if p := r.shown.Load(); p != nil {
		return *p
	}
	cells := make([]string, len(r.cells))
	copy(cells, r.cells)
	fig := r.Row // a cell may fill the row's lazy figures: not the shared ones
	for i, col := range present.View {
		if col.Windowed {
			cells[i] = col.Cell(&fig)
		}
	}
	r.shown.Store(&cells)
	return cells
}
