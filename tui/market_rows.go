package tui

import (
	"strings"

	"github.com/gpumarket/gpumarket/market"
	"github.com/gpumarket/gpumarket/providers/hub"
)

// gutter is the cursor, mark and restricted columns before the first
// cell. The cursor has a glyph of its own so it shows without colour too.
const gutter = 3

// row is one pool of the Market view: the figures the market package
// derives, and the cells of market.View made from them, recomputed only
// when the pool changes or the window does.
type row struct {
	market.Row
	derived   uint64 // the pool's Changed when it was derived
	windowSeq int
	seen      uint64

	cells  []string // market.View's cells, in its order
	search string   // lowercased text the `/` filter matches
	moving bool     // scratch for resort
}

func (r *row) compute(c *common, pv *hub.PoolView, from, to int64) {
	r.Row = market.Derive(pv, c.eff, from, to)
	r.derived, r.windowSeq = pv.Changed, c.windowSeq
	if len(r.cells) != len(market.View) {
		r.cells = make([]string, len(market.View))
	}
	for i, col := range market.View {
		r.cells[i] = col.Cell(&r.Row)
	}
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, pv.Provider, string(pv.Cloud)}, " "))
}
