package tui

import (
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// applySnapshot shows a new snapshot: its rows come from the process's
// Shared, derived by the first session to ask. When they were made from
// the rows this session showed, only the rows derived again move in the
// order; otherwise the list is filtered and sorted anew.
func (m *marketView) applySnapshot(s *feed.Snapshot) {
	if s == nil {
		return
	}
	m.snap = s
	from, to := m.c.span()
	rs := m.shared.rows(s, m.c.window, m.c.eff, m.effKey, from, to, m.rs)
	if rs == m.rs {
		return
	}
	prev := m.rs
	m.rs = rs
	switch {
	case prev != nil && prev.snap == s && m.listValid && !present.Sorts[m.sortBy].Windowed:
		// Another window of the same snapshot: the same pools at the same
		// indices, in the same order.
	case prev == nil || rs.prevID != prev.id || !rs.sameLayout || !m.listValid ||
		4*len(rs.changed) > len(rs.rows) || (rs.rewindowed && present.Sorts[m.sortBy].Windowed):
		m.rebuild()
	case len(rs.changed) > 0:
		m.resort(rs.changed)
	}
}

// refreshWindow takes the rows of the new window.
func (m *marketView) refreshWindow() {
	if m.snap != nil {
		m.applySnapshot(m.snap)
	}
}

func (m *marketView) matches(i int32) bool {
	r := m.rs.rows[i]
	if len(m.gpus) > 0 && !containsFold(m.gpus, r.GPU.Model) {
		return false
	}
	if len(m.regions) > 0 && !containsFold(m.regions, r.Region) {
		return false
	}
	return m.needle == "" || strings.Contains(r.search, m.needle)
}

func containsFold(list []string, v string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, v) })
}

// rebuild filters and sorts the rows, then puts the cursor back on the pool
// it was on, at the same height on screen.
func (m *marketView) rebuild() {
	screenRow := m.cursor - m.offset
	m.list = m.list[:0]
	if m.rs != nil {
		for i := range m.rs.rows {
			if m.matches(int32(i)) {
				m.list = append(m.list, int32(i))
			}
		}
	}
	slices.SortFunc(m.list, m.compare)
	m.listValid = true
	m.placeCursor(screenRow)
}

// resort moves the rows whose figures changed to their new places: the
// others keep their order, so this is a merge of the few changed rows into
// the sorted rest, not a sort of everything. A live tick changes a few
// pools out of thousands. The rows are new, the indices the same
// (sameLayout): the list is still over the pools it was.
func (m *marketView) resort(changed []int32) {
	screenRow := m.cursor - m.offset
	if len(m.moving) != len(m.rs.rows) {
		m.moving = make([]bool, len(m.rs.rows))
	}
	for _, i := range changed {
		m.moving[i] = true
	}
	kept := m.spare[:0]
	for _, i := range m.list {
		if !m.moving[i] {
			kept = append(kept, i)
		}
	}
	moved := m.movedBuf[:0]
	for _, i := range changed {
		m.moving[i] = false
		if m.matches(i) {
			moved = append(moved, i)
		}
	}
	slices.SortFunc(moved, m.compare)
	out := m.list[:0]
	if cap(out) < len(kept)+len(moved) {
		out = make([]int32, 0, len(kept)+len(moved))
	}
	// Each moved row goes in after the kept rows that sort before it:
	// a binary search per moved row and block copies in between.
	at := 0
	for _, i := range moved {
		rest := kept[at:]
		j, _ := slices.BinarySearchFunc(rest, i, m.compare)
		out = append(out, rest[:j]...)
		out = append(out, i)
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
	if m.rs != nil {
		if want, ok := m.rs.byKey[m.cursorKey]; ok {
			if i := slices.Index(m.list, want); i >= 0 {
				m.cursor = i
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
func (m *marketView) compare(a, b int32) int {
	return present.Compare(present.Sorts[m.sortBy], &m.rs.rows[a].Row, &m.rs.rows[b].Row, m.reverse)
}
