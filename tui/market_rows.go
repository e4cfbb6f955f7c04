package tui

import (
	"strings"
	"sync/atomic"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

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
