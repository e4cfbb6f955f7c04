package tui

import (
	"strings"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// gutter is the cursor, mark and restricted columns before the first
// cell. The cursor has a glyph of its own so it shows without colour too.
const gutter = 3

// row is one pool of the Market view: the figures the market package
// derives, and the cells of present.View made from them, recomputed only
// when the pool changes or the window does. The cells of the columns that
// read the window (the trend) are made only for the rows on screen: a
// window change at thousands of pools redoes a page of them, not all.
type row struct {
	present.Row
	derived uint64 // the pool's Changed when it was derived
	window  int    // the windowSeq that From and To are
	// cellsFor is the windowSeq the windowed cells were made for; -1 when
	// they are not made.
	cellsFor int
	seen     uint64

	cells  []string // present.View's cells, in its order
	search string   // lowercased text the `/` filter matches
	moving bool     // scratch for resort
}

// compute derives the row from the pool over the window [from, to] and
// makes its cells, but for the windowed ones (see fresh).
func (r *row) compute(c *common, pv *feed.PoolView, from, to int64) {
	r.Row = present.Derive(pv, c.eff, from, to)
	r.derived, r.window, r.cellsFor = pv.Changed, c.windowSeq, -1
	if len(r.cells) != len(present.View) {
		r.cells = make([]string, len(present.View))
	}
	for i, col := range present.View {
		if !col.Windowed {
			r.cells[i] = col.Cell(&r.Row)
		}
	}
	// The place as the REGION/ZONE column shows it too ("swedencentral/3"):
	// what is on screen is what / finds.
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, present.Place(pv.Region, pv.Zone),
		pv.Provider, string(pv.Cloud)}, " "))
}

// rewindow moves the row to the window windowSeq, [from, to]: nothing is
// recomputed until it is used.
func (r *row) rewindow(windowSeq int, from, to int64) {
	r.SetWindow(from, to)
	r.window, r.cellsFor = windowSeq, -1
}

// fresh makes the windowed cells, if they are not made for the row's
// window; the view calls it for the rows it shows.
func (r *row) fresh() {
	if r.cellsFor == r.window {
		return
	}
	for i, col := range present.View {
		if col.Windowed {
			r.cells[i] = col.Cell(&r.Row)
		}
	}
	r.cellsFor = r.window
}
