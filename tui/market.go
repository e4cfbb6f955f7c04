package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// marketView is the table of pools.
type marketView struct {
	c     *common
	keys  marketKeys
	fkeys filterKeys

	snap *feed.Snapshot
	// shared derives the rows once per process; rs are this session's.
	shared *Shared
	effKey string
	rs     *marketRows
	list   []int32 // into rs.rows, filtered and sorted: what the table shows
	// listValid: once built, live updates only move the rows that changed.
	listValid bool
	moving    []bool  // scratch for resort, by row index
	spare     []int32 // reused buffers for resort
	movedBuf  []int32

	cursor, offset int
	cursorKey      string
	marked         map[string]bool
	markOrder      []string

	sortBy  int // into present.Sorts
	reverse bool
	gpus    []string // GPU models shown; empty = all
	regions []string
	filter  textinput.Model
	typing  bool   // the `/` input has the keyboard
	needle  string // lowercased free-text filter
	// prompt asks a spot rule's price (a, alerts.go).
	prompt rulePrompt

	width, height int
	cols, ws      []int // shown, into present.View, and their widths
}

func newMarket(c *common, shared *Shared, gpus, regions []string) *marketView {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "GPU, instance type, region, zone or provider"
	ti.CharLimit = 64
	ti.KeyMap.Paste.SetEnabled(false) // the clipboard of the machine serving, over SSH
	m := &marketView{
		c: c, keys: newMarketKeys(&c.keys), fkeys: newFilterKeys(),
		shared: shared, effKey: effKey(c.eff), marked: map[string]bool{},
		gpus: gpus, regions: regions, filter: ti,
	}
	m.applyStyles()
	return m
}

// applyStyles: no blinking cursor, a blink redraws twice a second over SSH.
func (m *marketView) applyStyles() {
	st := textinput.DefaultStyles(true)
	if m.c.styles.noColor {
		st = textinput.Styles{}
	} else {
		st.Focused.Prompt = m.c.styles.filter
		st.Blurred.Prompt = m.c.styles.filter
	}
	st.Cursor.Blink = false
	m.filter.SetStyles(st)
}

func (m *marketView) Title() string { return "Market" }

func (m *marketView) KeyMap() help.KeyMap {
	if m.typing {
		return m.fkeys
	}
	if m.prompt.open {
		return promptKeys(true)
	}
	return m.keys
}

func (m *marketView) helpNote() string {
	return strings.Join([]string{
		"›  cursor    ●  marked: enter charts them    ⊘  restricted: not offered here",
		"EFF $/GPU-H  $ per useful GPU-hour for a job of " + m.c.eff.Label() + " (config plan.*):",
		"             $/GPU-h × paid hours per hour of work, given the interruptions",
		"INTR         instances interrupted per month (AWS Spot Advisor, Azure)",
		"TREND        highest price in each slice of the window",
	}, "\n")
}

// capturing: the filter input wants every key, q and tab too.
func (m *marketView) capturing() bool { return m.typing || m.prompt.open }

func (m *marketView) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.filter.SetWidth(max(w-2, 1))
	m.cols, m.ws = fitColumns(m.width - gutter)
	m.scrollToCursor()
}

// fitColumns is fitTable over present.View: shown column indices and widths.
func fitColumns(w int) (cols, ws []int) {
	all := present.MarketCols(present.View)
	for _, c := range fitTable(all, w-1) {
		cols = append(cols, slices.Index(all, c.Col))
		ws = append(ws, c.w)
	}
	return cols, ws
}

func (m *marketView) pageRows() int { return max(m.height-2, 1) }

func (m *marketView) scrollToCursor() {
	n, page := len(m.list), m.pageRows()
	m.cursor = max(min(m.cursor, n-1), 0)
	// In sight, the page as full as the rows allow.
	m.offset = max(min(max(min(m.offset, m.cursor), m.cursor-page+1), n-page), 0)
}

func (m *marketView) syncCursorKey() {
	if m.cursor < len(m.list) {
		m.cursorKey = m.row(m.cursor).Key
	}
}

func (m *marketView) move(to int) {
	m.cursor = to
	m.scrollToCursor()
	m.syncCursorKey()
}

func (m *marketView) Update(msg tea.Msg) (view, tea.Cmd) {
	switch msg := msg.(type) {
	case snapshotMsg:
		m.applySnapshot(msg.snap)
		return m, nil
	case windowChangedMsg:
		m.refreshWindow()
		return m, nil
	case tea.KeyPressMsg:
		if m.typing {
			return m.updateFilter(msg)
		}
		if m.prompt.open {
			return m, m.prompt.update(m.c, msg)
		}
		return m.updateKey(msg)
	case tea.PasteMsg:
		m.prompt.paste(msg)
	}
	if m.typing {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		m.setNeedle(m.filter.Value())
		return m, cmd
	}
	return m, nil
}

func (m *marketView) updateFilter(msg tea.KeyPressMsg) (view, tea.Cmd) {
	switch {
	case key.Matches(msg, m.fkeys.Apply):
		m.typing = false
		m.filter.Blur()
		return m, nil
	case key.Matches(msg, m.fkeys.Cancel):
		m.typing = false
		m.filter.Blur()
		m.filter.SetValue("")
		m.setNeedle("")
		return m, nil
	}
	var cmd tea.Cmd
	m.filter, cmd = m.filter.Update(msg)
	m.setNeedle(m.filter.Value())
	return m, cmd
}

func (m *marketView) setNeedle(s string) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == m.needle {
		return
	}
	m.needle = s
	m.rebuild()
}

func (m *marketView) updateKey(msg tea.KeyPressMsg) (view, tea.Cmd) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Up):
		m.move(m.cursor - 1)
	case key.Matches(msg, k.Down):
		m.move(m.cursor + 1)
	case key.Matches(msg, k.PageUp):
		m.move(m.cursor - m.pageRows())
	case key.Matches(msg, k.PageDown):
		m.move(m.cursor + m.pageRows())
	case key.Matches(msg, k.Home):
		m.move(0)
	case key.Matches(msg, k.End):
		m.move(len(m.list) - 1)
	case key.Matches(msg, k.Mark):
		if m.cursor < len(m.list) {
			m.toggleMark(m.row(m.cursor).Key)
			m.move(m.cursor + 1)
		}
	case key.Matches(msg, k.Sort):
		m.sortBy = (m.sortBy + 1) % len(present.Sorts)
		m.reverse = false
		m.rebuild()
		return m, notifyHere("sort: " + present.Sorts[m.sortBy].SortName)
	case key.Matches(msg, k.Reverse):
		m.reverse = !m.reverse
		m.rebuild()
	case key.Matches(msg, k.Window):
		return m, m.c.cycleWindow()
	case key.Matches(msg, k.GPU):
		m.gpus = cycleFilter(m.gpus, m.distinct(func(pv *feed.PoolView) string { return pv.GPU.Model }))
		m.rebuild()
		return m, notifyHere("GPU: " + listOrAll(m.gpus))
	case key.Matches(msg, k.Region):
		m.regions = cycleFilter(m.regions, m.distinct(func(pv *feed.PoolView) string { return pv.Region }))
		m.rebuild()
		return m, notifyHere("region: " + listOrAll(m.regions))
	case key.Matches(msg, k.Filter):
		m.typing = true
		m.filter.SetValue(m.needle)
		m.filter.CursorEnd()
		return m, m.filter.Focus()
	case key.Matches(msg, k.ClearFilter):
		if m.needle != "" || len(m.gpus) > 0 || len(m.regions) > 0 {
			m.filter.SetValue("")
			m.needle, m.gpus, m.regions = "", nil, nil
			m.rebuild()
			return m, notifyHere("filters cleared")
		}
	case key.Matches(msg, k.Plan):
		// The filters are the job's acceptable GPUs and where to run it.
		seed := planSeed{models: slices.Clone(m.gpus), regions: slices.Clone(m.regions), setRegions: true}
		return m, func() tea.Msg { return openPlanMsg{seed: seed} }
	case key.Matches(msg, k.Chart):
		keys, _ := m.picked()
		if len(keys) == 0 {
			return m, notifyHere("no pool to chart")
		}
		return m, func() tea.Msg { return openPoolsMsg{keys: keys} }
	case key.Matches(msg, k.Alert):
		return m, m.prompt.offer(m.c, m.makeSpotRule)
	}
	return m, nil
}

// picked: the marked pools in the market, in mark order, else the cursor's.
func (m *marketView) picked() (keys []string, marked bool) {
	for _, k := range m.markOrder {
		if m.inMarket(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 && m.cursor < len(m.list) {
		return []string{m.row(m.cursor).Key}, false
	}
	return keys, len(keys) > 0
}

func (m *marketView) row(i int) *row { return m.rs.rows[m.list[i]] }

func (m *marketView) allRows() int {
	if m.rs == nil {
		return 0
	}
	return len(m.rs.rows)
}

func (m *marketView) inMarket(k string) bool {
	if m.rs == nil {
		return false
	}
	_, ok := m.rs.byKey[k]
	return ok
}

func (m *marketView) toggleMark(k string) {
	if m.marked[k] {
		delete(m.marked, k)
		m.markOrder = slices.DeleteFunc(m.markOrder, func(x string) bool { return x == k })
		return
	}
	m.marked[k] = true
	m.markOrder = append(m.markOrder, k)
}

func (m *marketView) distinct(field func(*feed.PoolView) string) []string {
	var out []string
	for i := range m.allRows() {
		if v := field(&m.rs.snap.Pools[i]); v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cycleFilter steps a filter all → first → … → last → all.
func cycleFilter(cur, choices []string) []string {
	next := 0 // after all, or after a value no longer offered
	if len(cur) == 1 {
		next = slices.IndexFunc(choices, func(c string) bool { return strings.EqualFold(c, cur[0]) }) + 1
	}
	if len(cur) > 1 || next >= len(choices) {
		return nil
	}
	return []string{choices[next]}
}

func listOrAll(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

func (m *marketView) View() string {
	var b strings.Builder
	st := &m.c.styles
	if m.typing {
		b.WriteString(m.filter.View())
	} else if m.prompt.open {
		b.WriteString(m.prompt.view(st, m.width))
	} else {
		status := fmt.Sprintf("%d/%d pools · sort %s%s · window %s",
			len(m.list), m.allRows(), present.Sorts[m.sortBy].SortShort, m.arrow(), windowLabel(m.c.window))
		if len(m.gpus) > 0 {
			status += " · gpu " + listOrAll(m.gpus)
		}
		if len(m.regions) > 0 {
			status += " · region " + listOrAll(m.regions)
		}
		if m.needle != "" {
			status += " · /" + m.needle
		}
		if n := len(m.marked); n > 0 {
			status += fmt.Sprintf(" · %d marked", n)
		}
		b.WriteString(st.dim.Render(fit(status, m.width, false)))
	}
	if m.height == 1 {
		return b.String()
	}
	ws := m.ws
	var hdr strings.Builder
	hdr.WriteString(strings.Repeat(" ", min(gutter, m.width)))
	for i, c := range m.cols {
		col := present.View[c]
		title := col.Title
		if present.Sorts[m.sortBy] == col {
			title += m.arrow()
		}
		hdr.WriteString(fit(title, ws[i], col.Right))
		hdr.WriteByte(' ')
	}
	b.WriteByte('\n')
	b.WriteString(st.header.Render(fit(hdr.String(), m.width, false)))
	if len(m.list) == 0 {
		b.WriteByte('\n')
		switch {
		case m.allRows() == 0 && snapshotFailed(m.snap):
			// Not "waiting": the sources answered, with errors.
			b.WriteString(st.footerErr.Render(fit("  no prices yet: the header above says what failed; it is asked again each refresh", m.width, false)))
		case m.snap == nil || m.allRows() == 0:
			b.WriteString(st.dim.Render(fit("  waiting for the market…", m.width, false)))
		default:
			b.WriteString(st.dim.Render(fit("  no pool matches the filter (esc clears it)", m.width, false)))
		}
		return b.String()
	}
	end := min(m.offset+m.pageRows(), len(m.list))
	var line strings.Builder
	for i := m.offset; i < end; i++ {
		r := m.row(i)
		cells := r.cellsShown()
		b.WriteByte('\n')
		line.Reset()
		cur := i == m.cursor
		pointer, mark, restr := " ", " ", " "
		if cur {
			pointer = "›"
		}
		if m.marked[r.Key] {
			mark = "●"
		}
		if r.Restricted {
			restr = "⊘"
		}
		line.WriteString(pointer)
		if cur || st.noColor || (mark == " " && restr == " ") {
			line.WriteString(mark)
			line.WriteString(restr)
		} else {
			line.WriteString(st.pMarked.wrap(mark))
			line.WriteString(st.pRestricted.wrap(restr))
		}
		for j, c := range m.cols {
			col := present.View[c]
			cell := fit(cells[c], ws[j], col.Right)
			if col == present.ColInterruption && !cur && !st.noColor {
				switch {
				case r.BucketRank <= 0:
					cell = st.pCalm.wrap(cell)
				case r.BucketRank >= 3 && r.BucketRank < len(domain.Buckets):
					cell = st.pRough.wrap(cell)
				}
			}
			line.WriteString(cell)
			line.WriteByte(' ')
		}
		// The cells fit the width (fitColumns): no measuring.
		if cur {
			b.WriteString(st.pCursor.wrap(fit(line.String(), m.width, false)))
		} else {
			b.WriteString(line.String())
		}
	}
	return b.String()
}

// arrow is the sort's direction.
func (m *marketView) arrow() string {
	if m.reverse {
		return "↓"
	}
	return "↑"
}

// snapshotFailed: something failed and nothing is loading.
func snapshotFailed(s *feed.Snapshot) bool {
	if s == nil {
		return false
	}
	failed := false
	for _, src := range s.Sources {
		if sourceLoading(src) {
			return false
		}
		failed = failed || src.State == feed.StateError || failedRegions(src) > 0
	}
	return failed
}

// makeSpotRule: a spot rule on the row under the cursor, at 90 % of its price.
func (m *marketView) makeSpotRule() (*rulePrompt, tea.Cmd) {
	if m.cursor >= len(m.list) {
		return nil, notifyHere("no pool under the cursor to watch")
	}
	pv := m.rs.snap.Pools[m.list[m.cursor]] // the pool as the snapshot has it now
	p := rulePrompt{toggle: true, unit: "/h",
		what: fmt.Sprintf("spot %s in %s", present.DisplayType(pv.InstanceType), present.Place(pv.Region, pv.Zone))}
	if _, usd, ok := pv.History.Last(); ok {
		p.now = "now $" + present.Money(usd) + "/h"
		p.value = decimal(math.Round(usd*90) / 100)
	}
	p.build = func(above bool, v float64) watch.Spec {
		s := &watch.SpotRule{InstanceType: pv.InstanceType, Region: pv.Region, Zone: pv.Zone, Provider: pv.Provider}
		dir := "below"
		if above {
			s.AboveUSDHour, dir = &v, "above"
		} else {
			s.BelowUSDHour = &v
		}
		return watch.Spec{Name: ruleName("spot", pv.InstanceType, present.Place(pv.Region, pv.Zone), dir), Cond: s}
	}
	return &p, nil
}

// applySnapshot takes the snapshot's rows from Shared: made from the rows
// shown, only those derived again move; else the list is made anew.
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

// resort merges the rows whose figures changed into the sorted rest: a live
// tick changes a few pools of thousands. The indices are the same (sameLayout).
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

// compare orders two rows by the sort column (present.Compare: unknown last,
// ties by pool key so the order is stable between snapshots).
func (m *marketView) compare(a, b int32) int {
	return present.Compare(present.Sorts[m.sortBy], &m.rs.rows[a].Row, &m.rs.rows[b].Row, m.reverse)
}

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
