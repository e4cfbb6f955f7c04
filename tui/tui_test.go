package tui

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

func newTestModel(t testing.TB, w, h int, opt Options) *Model {
	t.Helper()
	opt.NoColor = true
	return newColorModel(t, w, h, opt)
}

func newColorModel(t testing.TB, w, h int, opt Options) *Model {
	t.Helper()
	if opt.Now == nil {
		opt.Now = nowFn
	}
	m := newBare(opt)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(snapshotMsg{snap: fixtureSnapshot()})
	return m
}

// newBare is New with the timers off, for tests that run commands.
func newBare(opt Options) *Model {
	m := New(opt)
	m.c.after = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	return m
}

// press sends keys: single characters, or names such as "enter", "esc",
// "down", "space", "tab".
func press(m *Model, keys ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "end":
			msg = tea.KeyPressMsg{Code: tea.KeyEnd}
		case "pgdown":
			msg = tea.KeyPressMsg{Code: tea.KeyPgDown}
		default:
			r := []rune(k)[0]
			msg = tea.KeyPressMsg{Code: r, Text: k}
		}
		_, cmd := m.Update(msg)
		out = append(out, run(m, cmd)...)
	}
	return out
}

// run executes a command the way the program would, feeding its messages
// back into the model. Timers are switched off in test models (c.after),
// so no command waits on a clock.
func run(m *Model, cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	var out []tea.Msg
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			out = append(out, run(m, c)...)
		}
	default:
		out = append(out, msg)
		_, next := m.Update(msg)
		out = append(out, run(m, next)...)
	}
	return out
}

func shownKeys(m *Model) []string {
	var ks []string
	for _, r := range shownRows(m.market) {
		ks = append(ks, r.Key)
	}
	return ks
}

// chartOf is the session's Chart view.
func chartOf(m *Model) *chartView {
	for _, v := range m.views {
		if c, ok := v.(*chartView); ok {
			return c
		}
	}
	return nil
}

// cellOf is a row's cell in the Market view's column col, as shown.
func cellOf(r *row, col *present.Column) string {
	for i, c := range present.View {
		if c == col {
			return r.cellsShown()[i]
		}
	}
	return ""
}

// shownRows are the rows of the Market's table, in its order.
func shownRows(m *marketView) []*row {
	out := make([]*row, len(m.list))
	for i := range m.list {
		out[i] = m.row(i)
	}
	return out
}

func cursorKey(m *Model) string {
	return m.market.row(m.market.cursor).Key
}

func TestCursorStaysOnPoolWhenPoolsAppearAbove(t *testing.T) {
	m := newTestModel(t, 120, 14, Options{})
	press(m, "down", "down", "down", "down", "down", "down")
	want := cursorKey(m)
	screenRow := m.market.cursor - m.market.offset

	// Cheaper pools, which sort above the cursor.
	s := fixtureSnapshot()
	s.Seq = 2
	for i := range 4 {
		f := fixturePools[4]
		f.zone = "us-east-2" + string(rune('w'+i))
		f.spot = 0.01 + float64(i)/1000
		pv := fixturePool0(i, f)
		pv.Changed = 2
		s.Pools = append(s.Pools, pv)
	}
	sortPools(s)
	m.Update(snapshotMsg{snap: s})

	if got := cursorKey(m); got != want {
		t.Fatalf("cursor moved from %s to %s", want, got)
	}
	if got := m.market.cursor - m.market.offset; got != screenRow {
		t.Errorf("cursor's screen row %d, want %d (scroll kept)", got, screenRow)
	}
	if m.market.row(0).InstanceType != "g4dn.xlarge" || m.market.row(0).Spot > 0.02 {
		t.Errorf("new cheap pools not on top: %s", shownKeys(m)[0])
	}
}

func TestCursorFollowsPoolWhenItsPriceMoves(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	want := cursorKey(m) // the cheapest
	s := fixtureSnapshot()
	s.Seq = 2
	for i := range s.Pools {
		if s.Pools[i].Key == want {
			pv := &s.Pools[i]
			pv.History = pv.History.Merge([]int64{fixedNow.Unix() + 60}, []float64{500})
			pv.Changed = 2
		}
	}
	m.Update(snapshotMsg{snap: s})
	if cursorKey(m) != want {
		t.Fatalf("cursor on %s, want %s", cursorKey(m), want)
	}
	if m.market.cursor != len(m.market.list)-1-unknownEffective(m) {
		t.Errorf("repriced pool at row %d of %d, want it last among known prices", m.market.cursor, len(m.market.list))
	}
}

func unknownEffective(m *Model) int {
	n := 0
	for _, r := range shownRows(m.market) {
		if math.IsNaN(r.Effective) {
			n++
		}
	}
	return n
}

func TestFilterAppliesAsYouType(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	all := len(m.market.list)
	press(m, "/", "H", "1", "0", "0")
	if !m.market.typing {
		t.Fatal("filter input closed while typing")
	}
	assertAll(t, m, "H100")
	press(m, "enter")
	if m.market.typing {
		t.Fatal("enter did not close the filter input")
	}
	assertAll(t, m, "H100")
	if got := len(m.market.list); got != 3 {
		t.Errorf("H100 pools %d, want 3", got)
	}
	// q and tab typed into the filter are text, not commands.
	press(m, "/", "q")
	if m.market.needle != "h100q" {
		t.Errorf("needle %q, want h100q", m.market.needle)
	}
	press(m, "esc")
	if len(m.market.list) != all || m.market.needle != "" {
		t.Errorf("esc left %d of %d pools, needle %q", len(m.market.list), all, m.market.needle)
	}
}

func TestFilterMatchesEveryField(t *testing.T) {
	for _, tc := range []struct {
		needle string
		want   int
	}{
		{"p5.48xlarge", 2}, {"eastus", 2}, {"us-east-1a", 1}, {"azure", 3}, {"t4", 2}, {"sim", len(fixturePools)}, {"nothing-such", 0},
		{"eastus/3", 1}, // as REGION/ZONE shows an Azure zone: it found nothing
	} {
		m := newTestModel(t, 120, 40, Options{})
		press(m, "/")
		press(m, strings.Split(tc.needle, "")...)
		if got := len(m.market.list); got != tc.want {
			t.Errorf("/%s: %d pools, want %d", tc.needle, got, tc.want)
		}
	}
}

func assertAll(t *testing.T, m *Model, gpu string) {
	t.Helper()
	if len(m.market.list) == 0 {
		t.Fatal("no pools left")
	}
	for _, r := range shownRows(m.market) {
		if r.GPU.Model != gpu {
			t.Errorf("%s left by filter for %s", r.Key, gpu)
		}
	}
}

func TestGPUAndRegionFiltersCycle(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{GPUs: []string{"h100"}})
	assertAll(t, m, "H100")
	press(m, "g") // the next model in the market after H100
	assertAll(t, m, "L40S")
	press(m, "g")
	assertAll(t, m, "T4")
	for range 10 {
		if len(m.market.gpus) == 0 {
			break
		}
		press(m, "g")
	}
	if len(m.market.list) != len(fixturePools) {
		t.Errorf("cycling back to all shows %d pools", len(m.market.list))
	}
	press(m, "r")
	if len(m.market.list) == 0 {
		t.Fatal("region filter left no pools to check")
	}
	for _, r := range shownRows(m.market) {
		if r.Region != "ap-northeast-1" {
			t.Errorf("region filter let %s through", r.Key)
		}
	}
}

func TestSortModes(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	fields := []func(*row) float64{
		func(r *row) float64 { return r.Effective },
		func(r *row) float64 { return r.PerGPU },
		func(r *row) float64 { return r.Spot },
		func(r *row) float64 { return -r.Savings },
		func(r *row) float64 { return float64(r.BucketRank) },
	}
	for mode, f := range fields {
		if int(m.market.sortBy) != mode {
			t.Fatalf("sort mode %d, want %d", m.market.sortBy, mode)
		}
		for _, reverse := range []bool{false, true} {
			prev := math.Inf(-1)
			if reverse {
				prev = math.Inf(1)
			}
			seenNaN := false
			for _, r := range shownRows(m.market) {
				v := f(r)
				if math.IsNaN(v) || (present.Sorts[mode] == present.ColInterruption && r.BucketRank == len(domain.Buckets)) {
					seenNaN = true
					continue
				}
				if seenNaN {
					t.Errorf("%s reverse=%v: %s after an unknown value", present.Sorts[mode].SortName, reverse, r.Key)
				}
				if (!reverse && v < prev) || (reverse && v > prev) {
					t.Errorf("%s reverse=%v: %s out of order (%v after %v)", present.Sorts[mode].SortName, reverse, r.Key, v, prev)
				}
				prev = v
			}
			press(m, "S")
		}
		press(m, "s")
	}
	if present.Sorts[m.market.sortBy] != present.ColGPU {
		t.Fatalf("after five presses sort is %s", present.Sorts[m.market.sortBy].SortName)
	}
	for i := 1; i < len(m.market.list); i++ {
		if m.market.row(i-1).GPU.Model > m.market.row(i).GPU.Model {
			t.Errorf("GPU sort: %s before %s", m.market.row(i-1).GPU.Model, m.market.row(i).GPU.Model)
		}
	}
	press(m, "s", "s")
	if m.market.sortBy != 0 {
		t.Errorf("sort does not wrap around: %s", present.Sorts[m.market.sortBy].SortName)
	}
}

func TestMarkAndOpenChart(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	first := cursorKey(m)
	press(m, "space") // marks and moves down
	press(m, "down")
	third := cursorKey(m)
	press(m, "space")
	if len(m.market.marked) != 2 {
		t.Fatalf("%d marked, want 2", len(m.market.marked))
	}
	press(m, "enter")
	if m.views[m.active] != chartOf(m) {
		t.Fatal("enter did not open the chart")
	}
	if got := chartOf(m).poolKeys; len(got) != 2 || got[0] != first || got[1] != third {
		t.Errorf("chart pools %v, want [%s %s]", got, first, third)
	}
	cur := m.market.cursor
	press(m, "esc")
	if m.views[m.active] != m.market || m.market.cursor != cur {
		t.Errorf("esc: view %s, cursor %d (want Market, %d)", m.views[m.active].Title(), m.market.cursor, cur)
	}
	// unmarking the first leaves the second
	press(m, "home", "space")
	if len(m.market.marked) != 1 || !m.market.marked[third] {
		t.Errorf("marks after unmarking: %v", m.market.marked)
	}
}

func TestEnterWithoutMarksChartsTheCursorPool(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	press(m, "down", "down")
	want := cursorKey(m)
	press(m, "enter")
	if got := chartOf(m).poolKeys; len(got) != 1 || got[0] != want {
		t.Errorf("chart pools %v, want [%s]", got, want)
	}
	out := ansi.Strip(m.View().Content)
	pv, _ := chartOf(m).snap.Pool(want)
	if name := present.DisplayType(pv.InstanceType) + " " + present.Place(pv.Region, pv.Zone) + " " + pv.Provider; !strings.Contains(out, name) {
		t.Errorf("chart legend lacks %s:\n%s", name, out)
	}
}

func TestWindowCycleExtendsHub(t *testing.T) {
	h := feed.New(nil, feed.Options{Query: domain.Query{Window: 24 * time.Hour}})
	m := newTestModel(t, 120, 40, Options{Hub: h, Window: 6 * time.Hour})
	press(m, "w")
	if m.c.window != 24*time.Hour || h.Window() != 24*time.Hour {
		t.Fatalf("after w: window %v, hub %v", m.c.window, h.Window())
	}
	press(m, "w")
	if m.c.window != 7*24*time.Hour || h.Window() != 7*24*time.Hour {
		t.Fatalf("after w: window %v, hub %v (want 168h both)", m.c.window, h.Window())
	}
	press(m, "w", "w", "w") // 30d, 90d, back to 1h
	if m.c.window != time.Hour || h.Window() != 90*24*time.Hour {
		t.Errorf("after wrap: window %v, hub %v", m.c.window, h.Window())
	}
	// The chart's w moves the same window.
	press(m, "enter", "w")
	if m.c.window != 6*time.Hour {
		t.Errorf("chart w: window %v, want 6h", m.c.window)
	}
}

func TestWindowChangeRecomputesRows(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{Window: time.Hour})
	m.View()
	r := m.market.row(0)
	before := cellOf(r, present.ColTrend)
	press(m, "w", "w", "w") // 6h, 24h, 7d
	if m.market.row(0).Key != r.Key {
		t.Fatal("a window change reordered the rows")
	}
	r = m.market.row(0)
	if from, to := m.c.span(); r.From != from || r.To != to {
		t.Fatalf("row window [%d, %d], want [%d, %d]", r.From, r.To, from, to)
	}
	m.View()
	if cellOf(r, present.ColTrend) == before {
		t.Errorf("trend unchanged from 1h to 7d: %q", before)
	}
	if _, mx := r.History.Downsample(r.From, r.To, present.SparkCols); cellOf(r, present.ColTrend) != present.Sparkline(mx) {
		t.Errorf("trend %q is not the 7d window's", cellOf(r, present.ColTrend))
	}
}

// TestWindowChangeRedoesOnlyWindowedCells: after `w` the rows keep their
// figures and order (no sort reads the window), and a row's trend is
// made when the row is shown, not before: at thousands of pools a window
// change costs a page of trends.
func TestWindowChangeRedoesOnlyWindowedCells(t *testing.T) {
	m := newTestModel(t, 120, 6, Options{Window: time.Hour}) // 3 rows on screen
	m.View()
	order := slices.Clone(m.market.list)
	first := m.market.row(0)
	derived, spot := first.derived, cellOf(first, present.ColSpot)
	press(m, "w")
	m.View()
	if !slices.Equal(order, m.market.list) {
		t.Fatal("a window change reordered the rows")
	}
	now, last := m.market.row(0), m.market.row(len(order)-1)
	if now.shown.Load() == nil || now.From == first.From {
		t.Fatal("the trend of a row on screen was not made for the new window")
	}
	if now.derived != derived || cellOf(now, present.ColSpot) != spot || &now.cells[0] != &first.cells[0] {
		t.Fatal("a window change derived the row again")
	}
	if last.shown.Load() != nil {
		t.Fatal("the trend of a row off screen was made before it was shown")
	}
	press(m, "end") // to the last row
	m.View()
	if last.shown.Load() == nil {
		t.Fatal("the trend of a row scrolled into view was not made")
	}
	if _, mx := last.History.Downsample(last.From, last.To, present.SparkCols); cellOf(last, present.ColTrend) != present.Sparkline(mx) {
		t.Errorf("trend %q is not the new window's", cellOf(last, present.ColTrend))
	}
}

func TestTabCyclesViewsAndHelpToggles(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	press(m, "tab")
	if m.active != 1 {
		t.Fatalf("tab: active %d", m.active)
	}
	// Market, Chart, Blocks, Plan, Fleet, Ledger, Usage: six more tabs wrap
	// around.
	press(m, "tab", "tab", "tab", "tab", "tab", "tab")
	if m.active != 0 {
		t.Fatalf("tab wrap: active %d of %d views", m.active, len(m.views))
	}
	press(m, "shift+tab")
	if got := m.views[m.active].Title(); got != "Usage" {
		t.Fatalf("shift+tab from Market went to %q, want Usage", got)
	}
	press(m, "tab")
	press(m, "?")
	out := ansi.Strip(m.View().Content)
	if !strings.Contains(out, "reverse sort") || !strings.Contains(out, "region filter") {
		t.Errorf("full help missing bindings:\n%s", out)
	}
	press(m, "?")
	if m.full {
		t.Error("? did not close the help")
	}
}

func TestQuit(t *testing.T) {
	for _, k := range []tea.KeyPressMsg{{Code: 'q', Text: "q"}, {Code: 'c', Mod: tea.ModCtrl}} {
		m := newTestModel(t, 80, 24, Options{})
		_, cmd := m.Update(k)
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s does not quit", k)
		}
	}
}

func TestReadOnly(t *testing.T) {
	if New(Options{Role: RoleViewer}).readOnly() != true || New(Options{}).readOnly() {
		t.Fatal("readOnly does not follow the role")
	}
	// The header says so (the refusal of each money key is
	// TestReadOnlySessionSpendsNothing's).
	if out := ansi.Strip(newTestModel(t, 120, 40, Options{Role: RoleViewer}).View().Content); !strings.Contains(out, "read-only") {
		t.Errorf("a viewer's header does not say read-only:\n%s", out)
	}
	if out := ansi.Strip(newTestModel(t, 120, 40, Options{}).View().Content); strings.Contains(out, "read-only") {
		t.Errorf("a booker's header says read-only:\n%s", out)
	}
}

func TestNoticeShowsInFooterAndExpires(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	m.Update(noticeMsg{text: "eastus: throttled", err: true})
	if out := m.View().Content; !strings.Contains(out, "eastus: throttled") {
		t.Fatalf("notice not in the footer:\n%s", out)
	}
	m.Update(noticeExpiredMsg{id: m.noticeN})
	if out := m.View().Content; strings.Contains(out, "eastus: throttled") {
		t.Error("notice outlived its timer")
	}
}

func TestTinySizesNeverPanic(t *testing.T) {
	sizes := [][2]int{{0, 0}, {1, 1}, {2, 2}, {20, 5}, {5, 20}, {40, 8}, {80, 24}, {120, 40}, {300, 100}}
	for _, sz := range sizes {
		for _, v := range []string{"market", "chart", "help", "filter", "colour market", "colour chart"} {
			m := newTestModel(t, 120, 40, Options{})
			if strings.HasPrefix(v, "colour") {
				m = newColorModel(t, 120, 40, Options{})
				press(m, "space", "space")
			}
			switch v {
			case "chart", "colour chart":
				press(m, "space", "space", "enter")
			case "help":
				press(m, "?")
			case "filter":
				press(m, "/", "a")
			}
			m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			press(m, "down", "pgdown", "end", "w")
			out := m.View().Content
			lines := strings.Split(out, "\n")
			if out != "" && len(lines) > sz[1] {
				t.Errorf("%s at %dx%d: %d lines", v, sz[0], sz[1], len(lines))
			}
			for _, l := range lines {
				if w := ansi.StringWidth(l); w > sz[0] {
					t.Errorf("%s at %dx%d: line of %d cells: %q", v, sz[0], sz[1], w, l)
				}
			}
		}
	}
}

func TestEmptyMarket(t *testing.T) {
	m := newBare(Options{Now: nowFn, NoColor: true})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(snapshotMsg{snap: &feed.Snapshot{Sources: []feed.SourceStatus{{Provider: "aws", State: feed.StateLoading,
		Regions: []feed.RegionStatus{{Region: "us-east-1", Done: 3, Total: 10}, {Region: "eu-west-1", Err: "AccessDenied: not authorized"}}}}}})
	press(m, "enter", "space", "s", "g", "r")
	out := ansi.Strip(m.View().Content)
	for _, want := range []string{"waiting for the market", "loading", "3/10", "eu-west-1", "AccessDenied"} {
		if !strings.Contains(out, want) {
			t.Errorf("empty market screen lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SIMULATED") {
		t.Error("aws-only market says SIMULATED")
	}
}

func TestNoColorHasNoEscapes(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	press(m, "space", "down", "space", "enter")
	for _, out := range []string{m.View().Content} {
		if strings.Contains(out, "\x1b") {
			t.Errorf("NoColor output has escape codes: %q", out[:min(len(out), 200)])
		}
	}
	press(m, "esc")
	if strings.Contains(m.View().Content, "\x1b") {
		t.Error("NoColor market has escape codes")
	}
}

func TestColorStylesFollowBackground(t *testing.T) {
	m := newBare(Options{Now: nowFn})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(snapshotMsg{snap: fixtureSnapshot()})
	dark := m.View().Content
	m.Update(tea.BackgroundColorMsg{Color: lightGray{}})
	light := m.View().Content
	if dark == light {
		t.Error("a light background did not change the styles")
	}
	if !strings.Contains(light, "\x1b[") {
		t.Error("colour output has no escape codes")
	}
}

type lightGray struct{}

func (lightGray) RGBA() (r, g, b, a uint32) { return 0xeeee, 0xeeee, 0xeeee, 0xffff }

func TestFitColumnsByPriority(t *testing.T) {
	all, _ := fitColumns(1000)
	if len(all) != len(present.View) {
		t.Fatalf("wide: %d columns", len(all))
	}
	narrow, ws := fitColumns(80 - gutter)
	has := map[*present.Column]bool{}
	for _, c := range narrow {
		has[present.View[c]] = true
	}
	for _, must := range []*present.Column{present.ColGPU, present.ColEffective, present.ColPlace, present.ColPerGPU} {
		if !has[must] {
			t.Errorf("80 columns drop %s", must.Title)
		}
	}
	if has[present.ColTrend] && !has[present.ColInstance] {
		t.Error("trend kept before instance type")
	}
	used := 0
	for _, w := range ws {
		used += w + 1
	}
	if used > 80-gutter {
		t.Errorf("80 columns: the shown columns take %d cells, more than %d", used, 80-gutter)
	}
	if got, _ := fitColumns(3); len(got) != 0 {
		t.Errorf("3 cells: %v", got)
	}
}

// TestLiveUpdateOrderMatchesFullSort checks the incremental re-sort of a
// live tick against sorting everything, in every sort mode.
func TestLiveUpdateOrderMatchesFullSort(t *testing.T) {
	for mode := range present.Sorts {
		m := newBare(Options{Now: nowFn, NoColor: true})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		base := bigSnapshot(300)
		m.Update(snapshotMsg{snap: base})
		for range mode {
			press(m, "s")
		}
		press(m, "/", "a", "enter") // a filter must hold for moved rows too
		for step := 1; step <= 5; step++ {
			s := *base
			s.Seq = base.Seq + uint64(step)
			s.Pools = append(s.Pools[:0:0], base.Pools...)
			for i := step; i < len(s.Pools); i += 37 {
				pv := &s.Pools[i]
				at, usd, _ := pv.History.Last()
				pv.History = pv.History.Merge([]int64{at + int64(step)*60}, []float64{usd * (0.5 + float64(i%7)/5)})
				pv.Changed = s.Seq
			}
			m.Update(snapshotMsg{snap: &s})
			got := shownKeys(m)
			m.market.rebuild()
			if want := shownKeys(m); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("sort %s step %d: incremental order differs from a full sort", present.Sorts[mode].SortName, step)
			}
		}
	}
}

func TestCellWidthAgreesWithAnsi(t *testing.T) {
	for _, s := range []string{"", "abc", "H100×8 80G", "▁▂▃█", "›●⊘", "\x1b[7mrev\x1b[m", "日本", "e\u0301", "a\u200bb", "⚡x", "━━ ⠋ …"} {
		if got, want := cellWidth(s), ansi.StringWidth(s); got != want {
			t.Errorf("cellWidth(%q) = %d, ansi says %d", s, got, want)
		}
	}
}

// TestSpinnerTicksOnlyWhileLoading: an idle session must not redraw.
func TestSpinnerTicksOnlyWhileLoading(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	loading := fixtureSnapshot()
	loading.Seq = 2
	loading.Sources = []feed.SourceStatus{{Provider: "sim", State: feed.StateReady,
		Regions: []feed.RegionStatus{{Region: "us-east-1", Done: 2, Total: 8}}}}
	_, cmd := m.Update(snapshotMsg{snap: loading})
	if !m.spinOn || cmd == nil {
		t.Fatal("no spinner while a region back-fills")
	}
	out := ansi.Strip(m.View().Content)
	if !strings.Contains(out, "loading") || !strings.Contains(out, "2/8") {
		t.Errorf("header lacks the back-fill progress:\n%s", out)
	}
	tick := m.spin.Tick()
	if _, cmd := m.Update(tick); cmd == nil {
		t.Error("spinner stopped while loading")
	}
	ready := fixtureSnapshot()
	ready.Seq = 3
	m.Update(snapshotMsg{snap: ready})
	if _, cmd := m.Update(m.spin.Tick()); cmd != nil || m.spinOn {
		t.Error("spinner still ticking with nothing loading")
	}
}

func TestHeaderShowsRegionErrorsAndStale(t *testing.T) {
	m := newTestModel(t, 160, 40, Options{})
	s := fixtureSnapshot()
	s.Seq = 2
	s.Sources = append(s.Sources, feed.SourceStatus{Provider: "aws", State: feed.StateReady, Stale: true, LastOK: fixedNow.Add(-5 * time.Minute),
		Regions: []feed.RegionStatus{{Region: "us-east-1"}, {Region: "eu-west-1", Err: "describe spot prices in eu-west-1: UnauthorizedOperation"}},
		Note:    "advisor data from 2025-06 (embedded)"})
	m.Update(snapshotMsg{snap: s})
	out := ansi.Strip(m.View().Content)
	for _, want := range []string{"aws", "stale", "eu-west-1", "UnauthorizedOperation", "advisor data from 2025-06", "SIMULATED MARKET"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q:\n%s", want, out)
		}
	}
}

func TestTabToEmptyChartShowsCursorPool(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	want := cursorKey(m)
	press(m, "tab")
	if got := chartOf(m).poolKeys; len(got) != 1 || got[0] != want {
		t.Errorf("chart after tab: %v, want [%s]", got, want)
	}
}

// FuzzFilter types arbitrary text into the `/` filter: it must never panic,
// and every pool left must contain the text.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"H100", "us-east-1a", "", " ", "Standard_", "×", "\x1b[31m", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := newTestModel(t, 80, 24, Options{})
		m.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
		for _, r := range s {
			m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
		}
		needle := strings.ToLower(strings.TrimSpace(m.market.filter.Value()))
		for _, r := range shownRows(m.market) {
			if !strings.Contains(r.search, needle) {
				t.Fatalf("%s left for %q", r.Key, needle)
			}
		}
		_ = m.View()
	})
}

// TestUnknownGPUCountIsNotZero: a pool whose GPU count is unknown shows
// "?" where the count goes, not 0.
func TestUnknownGPUCountIsNotZero(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	s := fixtureSnapshot()
	s.Seq = 2
	s.Pools[0].GPU = domain.GPUSpec{}
	s.Pools[0].Changed++
	m.Update(snapshotMsg{snap: s})
	found := false
	for _, r := range shownRows(m.market) {
		if r.Key != s.Pools[0].Key {
			continue
		}
		found = true
		if got := cellOf(r, present.ColGPU); got != "?×?" {
			t.Errorf("GPU cell %q for an unknown GPU, want ?×?", got)
		}
	}
	if !found {
		t.Fatalf("pool %s not in the list", s.Pools[0].Key)
	}
}

func TestSimulatedBadgeFollowsPools(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	s := fixtureSnapshot()
	s.Seq = 2
	s.Sources[0].Provider = "replay" // not named sim, but its pools say simulated
	for i := range s.Pools {
		s.Pools[i].Provider = "replay"
	}
	m.Update(snapshotMsg{snap: s})
	if !strings.Contains(m.View().Content, "SIMULATED MARKET") {
		t.Error("simulated pools without the badge")
	}
	for i := range s.Pools {
		s.Pools[i].Simulated = false
	}
	m.Update(snapshotMsg{snap: s})
	if strings.Contains(m.View().Content, "SIMULATED MARKET") {
		t.Error("badge on a market with nothing simulated")
	}
}

// TestHeaderNamesTheCause: a region's badge shows the AWS SDK error's
// cause, not its preamble; regions failing alike share one badge; a
// source whose data is stale is not called live.
func TestHeaderNamesTheCause(t *testing.T) {
	m := newTestModel(t, 160, 40, Options{})
	s := fixtureSnapshot()
	s.Seq = 2
	refused := func(r string) string {
		return "describe spot prices in " + r + ": operation error EC2: DescribeSpotPriceHistory, exceeded maximum number of attempts, 3, " +
			"https response error StatusCode: 0, RequestID: , request send failed, Post \"http://127.0.0.1:4566/\": dial tcp 127.0.0.1:4566: connect: connection refused"
	}
	s.Sources = append(s.Sources, feed.SourceStatus{Provider: "aws", State: feed.StateReady, Stale: true, LastOK: fixedNow.Add(-5 * time.Minute),
		Regions: []feed.RegionStatus{{Region: "us-east-1", Err: refused("us-east-1")}, {Region: "us-west-2", Err: refused("us-west-2")},
			{Region: "eu-west-1", Err: "describe spot prices in eu-west-1: operation error EC2: DescribeSpotPriceHistory, https response error StatusCode: 403, RequestID: x, api error UnauthorizedOperation: You are not authorized"}}})
	m.Update(snapshotMsg{snap: s})
	out := ansi.Strip(m.View().Content)
	for _, want := range []string{" us-east-1 us-west-2  connection refused", " eu-west-1  UnauthorizedOperation: You are not authorized", "◌ stale (data from 13:55)"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "● live · 3 regions") || strings.Count(out, "connection refused") != 1 {
		t.Errorf("stale source called live, or one cause repeated:\n%s", out)
	}
	if got := shortErr("", "plain cause", 48); got != "plain cause" {
		t.Errorf("shortErr of a plain error: %q", got)
	}
}

// TestEmptyMarketSaysWhyWhenSourcesFail: with no pools and every region
// refused, the table does not say it is waiting.
func TestEmptyMarketSaysWhyWhenSourcesFail(t *testing.T) {
	m := newTestModel(t, 100, 24, Options{})
	s := &feed.Snapshot{Seq: 9, Sources: []feed.SourceStatus{{Provider: "aws", State: feed.StateReady,
		Regions: []feed.RegionStatus{{Region: "us-east-1", Err: "describe spot prices in us-east-1: connection refused"}}}}}
	m.Update(snapshotMsg{snap: s})
	out := ansi.Strip(m.View().Content)
	if strings.Contains(out, "waiting for the market") || !strings.Contains(out, "no prices yet") || !strings.Contains(out, "· 1 region ") {
		t.Errorf("empty, failed market:\n%s", out)
	}
}

// TestSessionWindowNeverWidensSharedHub: two sessions on one hub that the
// server caps at its configured 24 hours. One session's w never makes the
// hub fetch or hold more than that for both; that session is told what
// the server keeps, and the other's window does not move.
func TestSessionWindowNeverWidensSharedHub(t *testing.T) {
	h := feed.New(nil, feed.Options{Query: domain.Query{Window: 24 * time.Hour}, MaxWindow: 24 * time.Hour})
	a := newTestModel(t, 120, 40, Options{Hub: h, Window: 6 * time.Hour, Role: RoleViewer})
	b := newTestModel(t, 120, 40, Options{Hub: h, Window: 24 * time.Hour})
	press(a, "w") // 6h → 24h: what the server keeps
	if a.c.window != 24*time.Hour || h.Window() != 24*time.Hour {
		t.Fatalf("after w: window %v, hub %v", a.c.window, h.Window())
	}
	press(a, "w") // 7d: beyond what the server keeps
	if h.Window() != 24*time.Hour {
		t.Fatalf("one session's w widened the shared hub to %v", h.Window())
	}
	if a.c.window > h.MaxWindow() {
		t.Errorf("the session's window %v is beyond what the hub holds", a.c.window)
	}
	if !strings.Contains(a.notice.text, "this server keeps 24h of history") {
		t.Errorf("no notice of what the server keeps: %q", a.notice.text)
	}
	for range 8 {
		press(a, "w")
		if h.Window() != 24*time.Hour || a.c.window > 24*time.Hour {
			t.Fatalf("w cycled to %v, hub %v", a.c.window, h.Window())
		}
	}
	// The chart's w goes through the same cap.
	press(a, "enter", "w", "w", "w", "w")
	if h.Window() != 24*time.Hour || a.c.window > 24*time.Hour {
		t.Errorf("chart w: window %v, hub %v", a.c.window, h.Window())
	}
	if b.c.window != 24*time.Hour || !strings.Contains(ansi.Strip(b.View().Content), "window 24h") {
		t.Errorf("the other session's window moved to %v", b.c.window)
	}
}

// TestWindowChangeResortsBySortThatReadsIt: an order that reads the window
// (none of the view's does yet; here the change over the window) is
// redone after `w`, from the new window's figures.
func TestWindowChangeResortsBySortThatReadsIt(t *testing.T) {
	change := func(r *present.Row) float64 { w := r.Window(); return w.Last / w.First }
	byChange := &present.Column{SortName: "change", SortShort: "change", Windowed: true,
		Compare: func(a, b *present.Row, rev bool) int { return cmp.Compare(change(a), change(b)) }}
	saved := present.Sorts
	present.Sorts = append(slices.Clone(saved), byChange)
	t.Cleanup(func() { present.Sorts = saved })
	m := newTestModel(t, 120, 40, Options{Window: time.Hour})
	m.market.sortBy = len(present.Sorts) - 1
	m.market.rebuild()
	hourly := slices.Clone(m.market.list)
	press(m, "w", "w", "w") // 7d
	if slices.Equal(hourly, m.market.list) {
		t.Fatal("the order by change over the window is the same over 1h and 7d: the test shows nothing")
	}
	for i := 1; i < len(m.market.list); i++ {
		a, b := m.market.row(i-1), m.market.row(i)
		if a.From != b.From || change(&a.Row) > change(&b.Row) {
			t.Fatalf("rows %d and %d out of the 7d window's order: %v > %v", i-1, i, change(&a.Row), change(&b.Row))
		}
	}
}

// TestHelpNotesBreakOnlyBetweenSentences: a help note is wrapped to the
// terminal; a line break written into it is a paragraph's end. Breaks
// laid out for 120 columns mid-sentence left ragged lines at 80 ("SPOT
// ALT is the\ncheapest spot pool … hours,\npriced as EFF").
func TestHelpNotesBreakOnlyBetweenSentences(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	for _, v := range m.views {
		n, ok := v.(helpNoter)
		if !ok || v == view(m.market) {
			continue // the Market's note is a legend, a line per term
		}
		parts := strings.Split(n.helpNote(), "\n")
		for _, p := range parts[:len(parts)-1] {
			if !strings.HasSuffix(p, ".") {
				t.Errorf("%s: the note breaks a line mid-sentence after %q", v.Title(), p[max(len(p)-30, 0):])
			}
		}
	}
}

// TestHeaderSaysPricesAreCached: a source whose regions' prices are still
// the history cache's says "cached HH:MM", in the full header and the
// compact one, never "live".
func TestHeaderSaysPricesAreCached(t *testing.T) {
	for _, size := range [][2]int{{160, 40}, {80, 24}} {
		m := newTestModel(t, size[0], size[1], Options{})
		s := fixtureSnapshot()
		s.Seq = 2
		at := fixedNow.Add(-95 * time.Minute)
		s.Sources = append(s.Sources, feed.SourceStatus{Provider: "aws", State: feed.StateReady, LastOK: fixedNow, CachedAt: at,
			Regions: []feed.RegionStatus{{Region: "us-east-1", Err: "connection refused", CachedAt: at}, {Region: "us-west-2"}}})
		m.Update(snapshotMsg{snap: s})
		out := ansi.Strip(m.View().Content)
		want := "cached " + at.In(fixedNow.Location()).Format("15:04")
		if !strings.Contains(out, want) {
			t.Errorf("%dx%d: header lacks %q:\n%s", size[0], size[1], want, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "aws") && strings.Contains(line, "live") {
				t.Errorf("%dx%d: a cached source called live: %q", size[0], size[1], line)
			}
		}
	}
}

// TestSourceLineSaysCachedOnce: in each state a source with cached prices
// says so once: as its state when nothing else is wrong, else after it.
func TestSourceLineSaysCachedOnce(t *testing.T) {
	m := newTestModel(t, 160, 40, Options{})
	for name, s := range map[string]feed.SourceStatus{
		"ready":             {State: feed.StateReady},
		"error":             {State: feed.StateError, Err: "boom"},
		"loading":           {State: feed.StateLoading},
		"stale":             {State: feed.StateReady, Stale: true},
		"no region answers": {State: feed.StateReady, Regions: []feed.RegionStatus{{Region: "us-east-1", Err: "refused"}}},
	} {
		s.Provider, s.CachedAt = "aws", fixedNow.Add(-time.Hour)
		if line := ansi.Strip(m.sourceLine(s)); strings.Count(line, "cached ") != 1 || strings.Contains(line, "live") {
			t.Errorf("%s: %q, want the cached mark once and no live", name, line)
		}
	}
}
