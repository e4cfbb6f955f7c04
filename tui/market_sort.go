package tui

import (
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// applySnapshot folds a new snapshot into the rows. Only pools whose Changed
// moved are recomputed; after a window change the others are moved to the
// new window, which redoes nothing but the windowed figures, when used,
// and the order only if the sort reads the window.
func (m *marketView) applySnapshot(s *feed.Snapshot) {
	if s == nil {
		return
	}
	m.snap = s
	from, to := m.c.span()
	ws := m.c.windowSeq
	structural := len(s.Pools) != len(m.all)
	rewindowed := false
	m.changed = m.changed[:0]
	// old and the new m.all share an array: iteration i reads old[i]
	// before it appends (writes) index i, so nothing is read after it is
	// overwritten.
	old := m.all
	m.all = m.all[:0]
	for i := range s.Pools {
		pv := &s.Pools[i]
		// Snapshots are sorted by key and rarely gain a pool, so the row at
		// the same index is almost always the one: no map lookup needed.
		var r *row
		if i < len(old) && old[i].Key == pv.Key {
			r = old[i]
		} else {
			r = m.rows[pv.Key]
		}
		if r == nil {
			r = &row{}
			m.rows[pv.Key] = r
			structural = true
		}
		stale := r.PoolView == nil || r.derived != pv.Changed
		r.PoolView = pv
		r.seen = s.Seq
		switch {
		case stale:
			r.compute(m.c, pv, from, to)
			m.changed = append(m.changed, r)
		case r.window != ws:
			r.rewindow(ws, from, to)
			rewindowed = true
		}
		m.all = append(m.all, r)
	}
	if len(m.rows) != len(s.Pools) {
		structural = true
		for k, r := range m.rows {
			if r.seen != s.Seq {
				delete(m.rows, k)
			}
		}
	}
	switch {
	case structural || !m.listValid || 4*len(m.changed) > len(m.all) || (rewindowed && present.Sorts[m.sortBy].Windowed):
		m.rebuild()
	case len(m.changed) > 0:
		m.resort(m.changed)
	}
}

// refreshWindow recomputes every row after the window changed.
func (m *marketView) refreshWindow() {
	if m.snap != nil {
		m.applySnapshot(m.snap)
	}
}

func (m *marketView) matches(r *row) bool {
	if len(m.gpus) > 0 && !containsFold(m.gpus, r.GPU.Model) {
		return false
	}
	if len(m.regions) > 0 && !containsFold(m.regions, r.Region) {
		return false
	}
	return m.needle == "" || strings.Contains(r.search, m.needle)
}

func containsFold(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

// rebuild filters and sorts the rows, then puts the cursor back on the pool
// it was on, at the same height on screen.
func (m *marketView) rebuild() {
	screenRow := m.cursor - m.offset
	m.list = m.list[:0]
	for _, r := range m.all {
		if m.matches(r) {
			m.list = append(m.list, r)
		}
	}
	slices.SortFunc(m.list, m.compare)
	m.listValid = true
	m.placeCursor(screenRow)
}

// resort moves the rows whose figures changed to their new places: the
// others keep their order, so this is a merge of the few changed rows into
// the sorted rest, not a sort of everything. A live tick changes a few
// pools out of thousands.
func (m *marketView) resort(changed []*row) {
	screenRow := m.cursor - m.offset
	for _, r := range changed {
		r.moving = true
	}
	kept := m.spare[:0]
	for _, r := range m.list {
		if !r.moving {
			kept = append(kept, r)
		}
	}
	moved := m.movedBuf[:0]
	for _, r := range changed {
		r.moving = false
		if m.matches(r) {
			moved = append(moved, r)
		}
	}
	slices.SortFunc(moved, m.compare)
	out := m.list[:0]
	if cap(out) < len(kept)+len(moved) {
		out = make([]*row, 0, len(kept)+len(moved))
	}
	// Each moved row goes in after the kept rows that sort before it:
	// a binary search per moved row and block copies in between.
	at := 0
	for _, r := range moved {
		rest := kept[at:]
		j, _ := slices.BinarySearchFunc(rest, r, m.compare)
		out = append(out, rest[:j]...)
		out = append(out, r)
		at += j
	}
	out = append(out, kept[at:]...)
	m.list, m.spare, m.movedBuf = out, kept, moved
	m.placeCursor(screenRow)
}

// placeCursor puts the cursor back on the pool it was on, at the same
// height on screen when it can.
func (m *marketView) placeCursor(screenRow int) {
	m.cursor = 0
	if want := m.rows[m.cursorKey]; want != nil {
		for i, r := range m.list {
			if r == want {
				m.cursor = i
				break
			}
		}
	}
	m.offset = m.cursor - screenRow
	m.scrollToCursor()
	m.syncCursorKey()
}

// compare orders two rows by the sort column (present.Compare: unknown
// figures last in either direction, ties by pool key so the order is
// stable between snapshots).
func (m *marketView) compare(a, b *row) int {
	return present.Compare(present.Sorts[m.sortBy], &a.Row, &b.Row, m.reverse)
}
