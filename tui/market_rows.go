package tui

import (
	"strings"
	"sync/atomic"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// gutter is the cursor, mark and restricted columns before the first
// cell. The cursor has a glyph of its own so it shows without colour too.
const gutter = 3

// row is one pool of the Market view: the figures the market package
// derives and the cells of present.View made from them. Rows live in
// marketRows that every session on the same snapshot, window and job
// reads, and a pool that did not change keeps its row from snapshot to
// snapshot: nothing in a row is written after it is made, except shown,
// which is set once and to the same cells by whoever gets there first.
type row struct {
	// Row's PoolView is the row's own copy of the pool as it was derived,
	// so that a row kept across snapshots keeps no old snapshot alive.
	// The pool's figures are the same in every snapshot its row is in;
	// its AsOf may be older (marketRows.snap has the current one).
	present.Row
	derived uint64 // the pool's Changed when it was derived

	// cells are present.View's cells, in its order, but for the windowed
	// ones (the trend): those are made only for the rows on screen, so a
	// window change at thousands of pools redoes a page of them, not all.
	// A row moved to another window shares the slice.
	cells  []string
	search string // lowercased text the `/` filter matches
	// shown is cells with the windowed ones made; nil until the row is on
	// someone's screen.
	shown atomic.Pointer[[]string]
}

// derive makes the row of the pool pv over the window [from, to] for the
// job eff, and its cells but for the windowed ones (see cellsShown).
func derive(pv *feed.PoolView, eff planner.Basis, from, to int64) *row {
	own := new(feed.PoolView)
	*own = *pv
	r := &row{Row: present.Derive(own, eff, from, to), derived: pv.Changed, cells: make([]string, len(present.View))}
	for i, col := range present.View {
		if !col.Windowed {
			r.cells[i] = col.Cell(&r.Row)
		}
	}
	// The place as the REGION/ZONE column shows it too ("swedencentral/3"):
	// what is on screen is what / finds.
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, present.Place(pv.Region, pv.Zone),
		pv.Provider, string(pv.Cloud)}, " "))
	return r
}

// rewindow returns the row moved to the window [from, to]: the figures
// and cells that do not read the window are kept.
func (r *row) rewindow(from, to int64) *row {
	n := &row{Row: r.Row, derived: r.derived, cells: r.cells, search: r.search}
	n.SetWindow(from, to)
	return n
}

// cellsShown returns the row's cells with the windowed ones made; the
// view calls it for the rows it shows. Two sessions making them at once
// make the same cells: either may win.
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
