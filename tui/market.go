package tui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/hub"
)

// sortMode is the Market view's order.
type sortMode int

const (
	sortEffective sortMode = iota
	sortPerGPU
	sortSpot
	sortSavings
	sortInterruption
	sortGPU
	sortRegion
	numSorts
)

var sortNames = [numSorts]string{"effective $/GPU-h", "$/GPU-h", "spot $/h", "savings", "interruption", "GPU", "region"}

// sortShort names the sort in the status line.
var sortShort = [numSorts]string{"effective", "$/GPU-h", "spot", "savings", "interruption", "GPU", "region"}

// column ids, in display order.
const (
	colGPU = iota
	colInstance
	colLocation
	colCloud
	colSpot
	colPerGPU
	colSavings
	colInterrupt
	colEffective
	colTrend
	numCols
)

type column struct {
	title string
	width int
	// prio orders the columns to keep as the terminal narrows: 0 first.
	prio  int
	right bool
}

var columns = [numCols]column{
	colGPU:       {"GPU", 12, 0, false},
	colInstance:  {"INSTANCE", 17, 5, false},
	colLocation:  {"REGION/ZONE", 16, 2, false},
	colCloud:     {"CLOUD", 5, 8, false},
	colSpot:      {"SPOT $/H", 8, 6, true},
	colPerGPU:    {"$/GPU-H", 8, 3, true},
	colSavings:   {"SAVE", 4, 7, true},
	colInterrupt: {"INTR", 6, 4, false},
	colEffective: {"EFF $/GPU-H", 12, 1, true},
	colTrend:     {"TREND", 12, 9, false},
}

// sparkCols is the width of the trend sparkline; fixed so it is computed
// once per change of a pool, not per frame.
const sparkCols = 12

// gutter is the cursor, mark and restricted columns before the first
// cell. The cursor has a glyph of its own so it shows without colour too.
const gutter = 3

// row is one pool with its derived figures, recomputed only when the pool
// changes or the window does.
type row struct {
	pv        *hub.PoolView // into the current snapshot; read-only
	changed   uint64
	windowSeq int
	seen      uint64

	spot, perGPU, savings, effective float64 // NaN when unknown
	bucketRank                       int
	cells                            [numCols]string
	search                           string // lowercased text the `/` filter matches
	moving                           bool   // scratch for resort
}

func (r *row) compute(c *common, from, to int64) {
	pv := r.pv
	r.changed, r.windowSeq = pv.Changed, c.windowSeq
	nan := math.NaN()
	r.spot, r.perGPU, r.savings, r.effective = nan, nan, nan, nan
	if _, usd, ok := pv.History.Last(); ok {
		r.spot = usd
		r.perGPU = providers.PerGPUHour(usd, pv.GPU.Count)
		if pv.OnDemandUSDHour != nil {
			r.savings = providers.SavingsPct(usd, *pv.OnDemandUSDHour)
		}
		if lambda, ok := pv.Interruption.Rate(); ok && !math.IsNaN(r.perGPU) {
			r.effective = c.risk.Effective(r.perGPU, lambda)
		}
	}
	bucket := "-"
	r.bucketRank = len(providers.Buckets)
	if pv.Interruption != nil && pv.Interruption.Bucket != "" {
		bucket = pv.Interruption.Bucket
		r.bucketRank = providers.BucketRank(bucket)
	}
	gpu := pv.GPU.Model
	if gpu == "" {
		gpu = "?"
	}
	gpu += "×" + gpuCount(pv.GPU.Count)
	if pv.GPU.MemoryGiB > 0 {
		gpu += fmt.Sprintf(" %.0fG", pv.GPU.MemoryGiB)
	}
	loc := pv.Region
	if pv.Zone != "" {
		if strings.HasPrefix(pv.Zone, pv.Region) {
			loc = pv.Zone
		} else {
			loc = pv.Region + "/" + pv.Zone
		}
	}
	savings := "-"
	if !math.IsNaN(r.savings) {
		savings = fmt.Sprintf("%.0f%%", r.savings)
	}
	_, maxs := pv.History.Downsample(from, to, sparkCols)
	r.cells = [numCols]string{
		colGPU:       gpu,
		colInstance:  displayType(pv.InstanceType),
		colLocation:  loc,
		colCloud:     string(pv.Cloud),
		colSpot:      money(r.spot),
		colPerGPU:    money(r.perGPU),
		colSavings:   savings,
		colInterrupt: bucket,
		colEffective: money(r.effective),
		colTrend:     sparkline(maxs),
	}
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, pv.Provider, string(pv.Cloud)}, " "))
}

// openChartMsg asks the root to show the Chart of these pools.
type openChartMsg struct{ keys []string }

// marketView is the table of pools.
type marketView struct {
	c     *common
	keys  marketKeys
	fkeys filterKeys

	snap *hub.Snapshot
	rows map[string]*row
	all  []*row // in snapshot order
	list []*row // filtered and sorted: what the table shows
	// listValid is false until list is built for the current filters and
	// sort; after that live updates only move the rows that changed.
	listValid bool
	changed   []*row
	spare     []*row // reused buffers for resort
	movedBuf  []*row

	cursor, offset int
	cursorKey      string
	marked         map[string]bool
	markOrder      []string

	sortBy  sortMode
	reverse bool
	gpus    []string // GPU models shown; empty = all
	regions []string
	filter  textinput.Model
	typing  bool   // the `/` input has the keyboard
	needle  string // lowercased free-text filter

	width, height int
	cols          []int
}

func newMarket(c *common, gpus, regions []string) *marketView {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "GPU, instance type, region, zone or provider"
	ti.CharLimit = 64
	m := &marketView{
		c: c, keys: newMarketKeys(&c.keys), fkeys: newFilterKeys(),
		rows: map[string]*row{}, marked: map[string]bool{},
		gpus: gpus, regions: regions, filter: ti,
	}
	m.applyStyles()
	return m
}

// applyStyles gives the filter input the session's styles, without a
// blinking cursor: a blink is a redraw twice a second over SSH.
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
	return m.keys
}

// capturing reports that the filter input wants every key, q and tab too.
func (m *marketView) capturing() bool { return m.typing }

func (m *marketView) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.filter.SetWidth(max(w-2, 1))
	m.cols = fitColumns(m.width - gutter)
	m.scrollToCursor()
}

// fitColumns picks the columns that fit in w cells, most important first,
// and returns them in display order.
func fitColumns(w int) []int {
	order := make([]int, numCols)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(columns[a].prio, columns[b].prio) })
	keep := make([]bool, numCols)
	used := 0
	for _, c := range order {
		need := columns[c].width + 1
		if used+need > w {
			continue
		}
		keep[c] = true
		used += need
	}
	var cols []int
	for c := range numCols {
		if keep[c] {
			cols = append(cols, c)
		}
	}
	return cols
}

// colWidths returns the width of each shown column, giving spare cells to
// the instance type and the location, whose names run long.
func (m *marketView) colWidths() []int {
	ws := make([]int, len(m.cols))
	used := 0
	for i, c := range m.cols {
		ws[i] = columns[c].width
		used += ws[i] + 1
	}
	spare := m.width - gutter - used
	for _, grow := range []struct{ col, upto int }{{colInstance, 26}, {colLocation, 20}} {
		for i, c := range m.cols {
			if c == grow.col && spare > 0 {
				add := min(spare, grow.upto-ws[i])
				if add > 0 {
					ws[i] += add
					spare -= add
				}
			}
		}
	}
	return ws
}

// applySnapshot folds a new snapshot into the rows. Only pools whose Changed
// moved (or all of them, after a window change) are recomputed.
func (m *marketView) applySnapshot(s *hub.Snapshot) {
	if s == nil {
		return
	}
	m.snap = s
	from, to := m.c.span()
	ws := m.c.windowSeq
	structural := len(s.Pools) != len(m.all)
	m.changed = m.changed[:0]
	m.all = m.all[:0]
	prev := len(m.all)
	for i := range s.Pools {
		pv := &s.Pools[i]
		// Snapshots are sorted by key and rarely gain a pool, so the row at
		// the same index is almost always the one: no map lookup needed.
		var r *row
		if i < prev && m.all[i].pv.Key == pv.Key {
			r = m.all[i]
		} else {
			r = m.rows[pv.Key]
		}
		if r == nil {
			r = &row{}
			m.rows[pv.Key] = r
			structural = true
		}
		stale := r.pv == nil || r.changed != pv.Changed || r.windowSeq != ws
		r.pv = pv
		r.seen = s.Seq
		if stale {
			r.compute(m.c, from, to)
			m.changed = append(m.changed, r)
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
	case structural || !m.listValid || 4*len(m.changed) > len(m.all):
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
	pv := r.pv
	if len(m.gpus) > 0 && !containsFold(m.gpus, pv.GPU.Model) {
		return false
	}
	if len(m.regions) > 0 && !containsFold(m.regions, pv.Region) {
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

// compare orders two rows by the sort mode; unknown figures go last in
// either direction, and ties fall back to the pool key so the order is
// stable between snapshots.
func (m *marketView) compare(a, b *row) int {
	var c int
	switch m.sortBy {
	case sortEffective:
		c = m.cmpFloat(a.effective, b.effective)
	case sortPerGPU:
		c = m.cmpFloat(a.perGPU, b.perGPU)
	case sortSpot:
		c = m.cmpFloat(a.spot, b.spot)
	case sortSavings:
		// the biggest saving first; NaN stays NaN when negated, so last
		c = m.cmpFloat(-a.savings, -b.savings)
	case sortInterruption:
		unknownA, unknownB := a.bucketRank >= len(providers.Buckets), b.bucketRank >= len(providers.Buckets)
		if unknownA != unknownB {
			c = map[bool]int{true: 1, false: -1}[unknownA]
		} else {
			c = m.dir(cmp.Compare(a.bucketRank, b.bucketRank))
		}
		if c == 0 {
			c = cmpNaNLast(a.effective, b.effective)
		}
	case sortGPU:
		c = m.dir(cmp.Or(strings.Compare(a.pv.GPU.Model, b.pv.GPU.Model), cmp.Compare(b.pv.GPU.Count, a.pv.GPU.Count)))
		if c == 0 {
			c = cmpNaNLast(a.effective, b.effective)
		}
	case sortRegion:
		c = m.dir(cmp.Or(strings.Compare(a.pv.Region, b.pv.Region), strings.Compare(a.pv.Zone, b.pv.Zone)))
		if c == 0 {
			c = cmpNaNLast(a.effective, b.effective)
		}
	}
	if c != 0 {
		return c
	}
	return strings.Compare(a.pv.Key, b.pv.Key)
}

func (m *marketView) dir(c int) int {
	if m.reverse {
		return -c
	}
	return c
}

// cmpFloat compares in the sort direction with NaN always last.
func (m *marketView) cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return m.dir(cmp.Compare(a, b))
}

func cmpNaNLast(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

func (m *marketView) pageRows() int { return max(m.height-2, 1) }

func (m *marketView) scrollToCursor() {
	n := len(m.list)
	if m.cursor >= n {
		m.cursor = n - 1
	}
	if m.cursor < 0 {
		m.cursor = 0
	}
	page := m.pageRows()
	if m.offset > m.cursor {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+page {
		m.offset = m.cursor - page + 1
	}
	if m.offset > n-page {
		m.offset = n - page
	}
	if m.offset < 0 {
		m.offset = 0
	}
}

func (m *marketView) syncCursorKey() {
	if m.cursor < len(m.list) {
		m.cursorKey = m.list[m.cursor].pv.Key
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
		return m.updateKey(msg)
	}
	if m.typing {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
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
			m.toggleMark(m.list[m.cursor].pv.Key)
			m.move(m.cursor + 1)
		}
	case key.Matches(msg, k.Sort):
		m.sortBy = (m.sortBy + 1) % numSorts
		m.reverse = false
		m.rebuild()
		return m, notify("sort: " + sortNames[m.sortBy])
	case key.Matches(msg, k.Reverse):
		m.reverse = !m.reverse
		m.rebuild()
	case key.Matches(msg, k.Window):
		m.c.cycleWindow()
		return m, windowChanged
	case key.Matches(msg, k.GPU):
		m.gpus = cycleFilter(m.gpus, m.distinct(func(pv *hub.PoolView) string { return pv.GPU.Model }))
		m.rebuild()
		return m, notify("GPU: " + listOrAll(m.gpus))
	case key.Matches(msg, k.Region):
		m.regions = cycleFilter(m.regions, m.distinct(func(pv *hub.PoolView) string { return pv.Region }))
		m.rebuild()
		return m, notify("region: " + listOrAll(m.regions))
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
			return m, notify("filters cleared")
		}
	case key.Matches(msg, k.Chart):
		keys := m.chartKeys()
		if len(keys) == 0 {
			return m, notify("no pool to chart")
		}
		return m, func() tea.Msg { return openChartMsg{keys: keys} }
	}
	return m, nil
}

// chartKeys returns the marked pools still in the market, in the order
// they were marked, or else the pool under the cursor.
func (m *marketView) chartKeys() []string {
	var keys []string
	for _, k := range m.markOrder {
		if _, ok := m.rows[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 && m.cursor < len(m.list) {
		keys = []string{m.list[m.cursor].pv.Key}
	}
	return keys
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

// distinct lists the values of a pool field present in the snapshot, sorted.
func (m *marketView) distinct(field func(*hub.PoolView) string) []string {
	set := map[string]bool{}
	for _, r := range m.all {
		if v := field(r.pv); v != "" {
			set[v] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// cycleFilter steps a one-value filter through the choices: all → first →
// … → last → all. A filter of several values (from the command line) steps
// to the first choice.
func cycleFilter(cur, choices []string) []string {
	if len(choices) == 0 {
		return nil
	}
	if len(cur) != 1 {
		if len(cur) == 0 {
			return []string{choices[0]}
		}
		return nil
	}
	for i, c := range choices {
		if strings.EqualFold(c, cur[0]) {
			if i+1 < len(choices) {
				return []string{choices[i+1]}
			}
			return nil
		}
	}
	return []string{choices[0]}
}

func listOrAll(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

func (m *marketView) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var b strings.Builder
	st := &m.c.styles
	// status / filter line
	if m.typing {
		b.WriteString(m.filter.View())
	} else {
		arrow := "↑"
		if m.reverse {
			arrow = "↓"
		}
		status := fmt.Sprintf("%d/%d pools · sort %s%s · window %s",
			len(m.list), len(m.all), sortShort[m.sortBy], arrow, windowLabel(m.c.window))
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
	ws := m.colWidths()
	// column header
	var hdr strings.Builder
	hdr.WriteString(strings.Repeat(" ", min(gutter, m.width)))
	for i, c := range m.cols {
		title := columns[c].title
		if sortColumn(m.sortBy) == c {
			title += map[bool]string{false: "↑", true: "↓"}[m.reverse]
		}
		hdr.WriteString(fit(title, ws[i], columns[c].right))
		hdr.WriteByte(' ')
	}
	b.WriteByte('\n')
	b.WriteString(st.header.Render(fit(hdr.String(), m.width, false)))
	if len(m.list) == 0 {
		b.WriteByte('\n')
		switch {
		case m.snap == nil || len(m.all) == 0:
			b.WriteString(st.dim.Render(fit("  waiting for the market…", m.width, false)))
		default:
			b.WriteString(st.dim.Render(fit("  no pool matches the filter (esc clears it)", m.width, false)))
		}
		return b.String()
	}
	end := min(m.offset+m.pageRows(), len(m.list))
	var line strings.Builder
	for i := m.offset; i < end; i++ {
		r := m.list[i]
		b.WriteByte('\n')
		line.Reset()
		cur := i == m.cursor
		pointer, mark, restr := " ", " ", " "
		if cur {
			pointer = "›"
		}
		if m.marked[r.pv.Key] {
			mark = "●"
		}
		if r.pv.Restricted {
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
			cell := fit(r.cells[c], ws[j], columns[c].right)
			if c == colInterrupt && !cur && !st.noColor {
				switch {
				case r.bucketRank <= 0:
					cell = st.pCalm.wrap(cell)
				case r.bucketRank >= 3 && r.bucketRank < len(providers.Buckets):
					cell = st.pRough.wrap(cell)
				}
			}
			line.WriteString(cell)
			line.WriteByte(' ')
		}
		// The cells add up to at most the width (colWidths), so the line
		// needs no measuring.
		if cur {
			b.WriteString(st.pCursor.wrap(fit(line.String(), m.width, false)))
		} else {
			b.WriteString(line.String())
		}
	}
	return b.String()
}

func sortColumn(s sortMode) int {
	switch s {
	case sortEffective:
		return colEffective
	case sortPerGPU:
		return colPerGPU
	case sortSpot:
		return colSpot
	case sortSavings:
		return colSavings
	case sortInterruption:
		return colInterrupt
	case sortGPU:
		return colGPU
	case sortRegion:
		return colLocation
	}
	return -1
}

// displayType shortens Azure's "Standard_NC40ads_H100_v5" to the
// "NC40ads_H100_v5" people say; the filter still matches the full name.
func displayType(t string) string {
	return strings.TrimPrefix(t, "Standard_")
}
