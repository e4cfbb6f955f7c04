package tui

import (
	"context"
	"fmt"
	"image/color"
	"slices"
	"strconv"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/guptarohit/asciigraph"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/watch"
)

// common is what one session's views share; nothing here is global.
type common struct {
	width, height int
	styles        styles
	keys          globalKeys

	hub    *feed.Hub
	eff    planner.Basis // the job EFF $/GPU-H is for
	now    func() time.Time
	window time.Duration
	// windowSeq grows with each window change: derived figures know they are stale.
	windowSeq int
	role      Role
	actor     string
	// after is tea.Tick; Update tests replace it so no command waits on a clock.
	after func(time.Duration, func(time.Time) tea.Msg) tea.Cmd
	// market's picks are what the Chart and Fleet view show.
	market *marketView
	// idleAlerts are the rows idle past budget.max_idle_pct, for the header.
	idleAlerts []ledger.Alert
	// watch is the process's alert evaluator; nil when the session has none.
	watch *watch.Evaluator
}

// windows are the steps `w` cycles through.
var windows = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 90 * 24 * time.Hour}

// nextWindow returns the smallest step longer than d, wrapping around.
func nextWindow(d time.Duration) time.Duration {
	for _, w := range windows {
		if w > d {
			return w
		}
	}
	return windows[0]
}

// cycleWindow moves to the next window, asking the hub for more history; a
// shared hub's MaxWindow wraps the cycle, so one session never grows it for all.
func (c *common) cycleWindow() tea.Cmd {
	next := nextWindow(c.window)
	capped := ""
	if c.hub != nil && next > c.hub.MaxWindow() {
		capped = fmt.Sprintf("this server keeps %s of history (its configured window): w cycles up to %s; window: %s",
			windowLabel(c.hub.MaxWindow()), windowLabel(c.hub.MaxWindow()), windowLabel(windows[0]))
		next = windows[0]
	}
	c.setWindow(next)
	return func() tea.Msg { return windowChangedMsg{capped: capped} }
}

func (c *common) setWindow(d time.Duration) {
	if d == c.window {
		return
	}
	c.window = d
	c.windowSeq++
	if c.hub != nil && d > c.hub.Window() {
		c.hub.Extend(d)
	}
}

// span returns the window as Unix seconds ending now.
func (c *common) span() (from, to int64) {
	now := c.now()
	return now.Add(-c.window).Unix(), now.Unix()
}

// windowLabel says 24h rather than 1d.
func windowLabel(d time.Duration) string {
	if d < 48*time.Hour && d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return domain.FormatWindow(d)
}

// view is one screen of the TUI; its optional abilities are the small
// interfaces below, found by type assertion (k9s's dao.Nuker).
type view interface {
	Update(tea.Msg) (view, tea.Cmd)
	View() string
	SetSize(w, h int)
	KeyMap() help.KeyMap
	Title() string
}

type (
	// helpNoter says on the full help what its marks and columns mean.
	helpNoter interface{ helpNote() string }

	// capturer sometimes wants every key: the root then passes q, tab, ? and esc.
	capturer interface{ capturing() bool }

	// shower works when shown: e.g. Blocks searches only once opened.
	shower interface{ shown() tea.Cmd }

	// escHomer goes back to the Market on esc when nothing of its own is open.
	escHomer interface{ escGoesHome() }

	// marketFilterer has nothing to filter: / opens the Market's filter.
	marketFilterer interface{ slashFiltersMarket() }

	// confirmer's open box replaces the view on screen and takes every key.
	confirmer interface{ box() *confirmation }

	// poolShower shows the pools enter picks in the Market.
	poolShower interface{ showPools(keys []string) }

	// planOpener plans a job from the Market's or the Blocks view's terms.
	planOpener interface{ openPlan(planSeed) }
)

type viewID int

// resultMsg takes a command's result to the view that asked, shown or not
// (gh-dash's TaskFinishedMsg), so a purchase's answer is never lost.
type resultMsg struct {
	to  viewID
	msg tea.Msg
}

// owner, embedded in a view, brings its commands' results back to it.
type owner struct{ id viewID }

// base is what a view embeds: its results' way back, the session, its size.
type base struct {
	owner
	c    *common
	ctx  context.Context
	w, h int
}

func (b *base) SetSize(w, h int) { b.w, b.h = w, h }
func (b *base) escGoesHome()     {}

// confirmation is the view's box for money actions; spends: it has a ledger.
func (b *base) confirmation(spends bool) confirmation {
	return confirmation{c: b.c, ctx: b.ctx, owner: &b.owner, spends: spends}
}

func (o *owner) setID(id viewID) { o.id = id }

func (o *owner) task(f func() tea.Msg) tea.Cmd {
	id := o.id
	return func() tea.Msg { return resultMsg{to: id, msg: f()} }
}

// after delivers msg after d, through the session's clock (tests stop it).
func (o *owner) after(c *common, d time.Duration, msg tea.Msg) tea.Cmd {
	id := o.id
	return c.after(d, func(time.Time) tea.Msg { return resultMsg{to: id, msg: msg} })
}

// loader runs a view's reads in tasks; only the latest read's answer is taken.
type loader struct {
	seq         int
	busy, ready bool
	last        time.Time // when the latest answer came
	err         string
}

// loadedMsg is a read's answer.
type loadedMsg[T any] struct {
	seq int
	val T
	err error
}

// load reads in a task owned by o; the answer comes back as a loadedMsg[T].
func load[T any](l *loader, o *owner, ctx context.Context, read func(context.Context) (T, error)) tea.Cmd {
	l.busy = true
	l.seq++
	seq := l.seq
	return o.task(func() tea.Msg {
		v, err := read(ctx)
		return loadedMsg[T]{seq: seq, val: v, err: err}
	})
}

// took says whether seq is the latest read's, and notes its answer.
func (l *loader) took(seq int, err error, now time.Time) bool {
	if seq != l.seq {
		return false
	}
	l.busy, l.ready, l.last, l.err = false, true, now, ""
	if err != nil {
		l.err = err.Error()
	}
	return true
}

type openPoolsMsg struct{ keys []string }

// openPlanMsg asks the root to open the plan of a job on these terms.
type openPlanMsg struct{ seed planSeed }

type backMsg struct{}

// globalKeys are the keys every view honours, one set per session.
type globalKeys struct {
	NextView, PrevView, Help, Quit, Back key.Binding
	Filter                               key.Binding // / where a view has nothing to filter: the Market's
}

func newGlobalKeys() globalKeys {
	return globalKeys{
		NextView: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next view")),
		PrevView: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "prev view")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to market")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter the market")),
	}
}

// row is the global keys' line of the `?` screen; filter: / filters the Market.
func (g *globalKeys) row(filter bool) []key.Binding {
	if filter {
		return []key.Binding{g.Back, g.Filter, g.NextView, g.PrevView, g.Help, g.Quit}
	}
	return []key.Binding{g.Back, g.NextView, g.PrevView, g.Help, g.Quit}
}

// keyMap is a help.KeyMap given as lists: the footer's and the `?` screen's.
type keyMap struct {
	short []key.Binding
	full  [][]key.Binding
}

func (k keyMap) ShortHelp() []key.Binding  { return k.short }
func (k keyMap) FullHelp() [][]key.Binding { return k.full }

// keyList is the footer while a form or a confirmation has every key.
func keyList(b ...key.Binding) keyMap { return keyMap{b, [][]key.Binding{b}} }

// listKeys are a list view's keys: its actions (full: short if nil) and ↑/↓.
type listKeys struct {
	keyMap
	Up, Down key.Binding
}

func newListKeys(g *globalKeys, filter bool, short, full []key.Binding) listKeys {
	if full == nil {
		full = short
	}
	up, down := upKey(), downKey()
	return listKeys{keyMap{append(slices.Clip(short), up, down), [][]key.Binding{{up, down}, full, g.row(filter)}}, up, down}
}

// move steps cur over n rows on ↑/↓; it says whether msg was one of them.
func (k listKeys) move(msg tea.KeyPressMsg, cur *int, n int) bool {
	switch {
	case key.Matches(msg, k.Up):
		*cur = max(*cur-1, 0)
	case key.Matches(msg, k.Down):
		*cur = min(*cur+1, max(n-1, 0))
	default:
		return false
	}
	return true
}

func upKey() key.Binding {
	return key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up"))
}

func downKey() key.Binding {
	return key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down"))
}

// marketKeys are the Market view's keys.
type marketKeys struct {
	Up, Down, PageUp, PageDown, Home, End key.Binding
	Mark, Sort, Reverse, Window, GPU      key.Binding
	Region, Filter, Chart, ClearFilter    key.Binding
	Plan, Alert                           key.Binding
	keyMap
}

func newMarketKeys(g *globalKeys) marketKeys {
	k := marketKeys{
		Up:          upKey(),
		Down:        downKey(),
		PageUp:      key.NewBinding(key.WithKeys("pgup", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PageDown:    key.NewBinding(key.WithKeys("pgdown", "ctrl+f"), key.WithHelp("pgdn", "page down")),
		Home:        key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "first")),
		End:         key.NewBinding(key.WithKeys("end"), key.WithHelp("end", "last")),
		Mark:        key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "mark")),
		Sort:        key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		Reverse:     key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "reverse sort")),
		Window:      key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "window")),
		GPU:         key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "gpu filter")),
		Region:      key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "region filter")),
		Filter:      key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Chart:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "chart")),
		ClearFilter: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
		Plan:        key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "plan a job")),
		Alert:       key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "alert rule")),
	}
	// The footer most used first; the `?` screen.
	k.keyMap = keyMap{[]key.Binding{k.Chart, k.Mark, k.Filter, k.Sort, k.Window, k.GPU, k.Region, k.Plan}, [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End},
		{k.Chart, k.Mark, k.Sort, k.Reverse, k.Window},
		{k.Filter, k.ClearFilter, k.GPU, k.Region, k.Plan, k.Alert},
		{g.NextView, g.PrevView, g.Help, g.Quit},
	}}
	return k
}

// chartKeys are the Chart view's keys.
type chartKeys struct {
	Window, Unit, Back key.Binding
	keyMap
}

func newChartKeys(g *globalKeys) chartKeys {
	k := chartKeys{
		Window: key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "window")),
		Unit:   key.NewBinding(key.WithKeys("u"), key.WithHelp("u", "$/h ↔ $/GPU-h")),
		Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to market")),
	}
	k.keyMap = keyMap{[]key.Binding{k.Window, k.Unit, k.Back},
		[][]key.Binding{{k.Window, k.Unit, k.Back, g.Filter}, {g.NextView, g.PrevView, g.Help, g.Quit}}}
	return k
}

// filterKeys are shown while the free-text filter is being typed.
type filterKeys struct {
	Apply, Cancel key.Binding
	keyMap
}

func newFilterKeys() filterKeys {
	k := filterKeys{
		Apply:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep filter")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	}
	k.keyMap = keyList(k.Apply, k.Cancel)
	return k
}

// styles are one session's, built from its terminal's background: two SSH
// clients never share (or overwrite) each other's look.
type styles struct {
	noColor bool

	title       lipgloss.Style
	tab         lipgloss.Style
	activeTab   lipgloss.Style
	badgeSim    lipgloss.Style
	badgeErr    lipgloss.Style
	stale       lipgloss.Style
	dim         lipgloss.Style
	ok          lipgloss.Style
	header      lipgloss.Style // the table's column header
	cursor      lipgloss.Style // the selected row
	marked      lipgloss.Style // the mark gutter of a marked row
	restricted  lipgloss.Style
	calm, rough lipgloss.Style // interruption buckets
	footerMsg   lipgloss.Style
	footerErr   lipgloss.Style
	filter      lipgloss.Style

	help help.Styles

	// paints are the hot-path styles of the table rows.
	pCursor, pMarked, pRestricted, pCalm, pRough paint

	// series are the chart's line colours, one per marked pool, in the
	// 256-colour palette asciigraph speaks; seriesStyle renders the legend
	// swatch in the same colour.
	series      []asciigraph.AnsiColor
	seriesStyle []lipgloss.Style
}

// newStyles builds the styles for a dark or light background; with noColor
// every style is plain, so NO_COLOR output carries no escape codes.
func newStyles(isDark, noColor bool) styles {
	if noColor {
		// The zero lipgloss.Style is plain (lipgloss.NewStyle), as are the help's.
		return styles{noColor: true, series: []asciigraph.AnsiColor{asciigraph.Default}, seriesStyle: []lipgloss.Style{{}}}
	}
	ld := lipgloss.LightDark(isDark)
	fg := func(light, dark string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dark)) }
	s := styles{
		title:      lipgloss.NewStyle().Bold(true).Foreground(fg("#5A3FD0", "#B4A7FF")),
		tab:        lipgloss.NewStyle().Foreground(fg("#6B6B6B", "#8A8A8A")),
		activeTab:  lipgloss.NewStyle().Bold(true).Underline(true).Foreground(fg("#1A1A1A", "#F0F0F0")),
		badgeSim:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("#1A1A1A")).Background(fg("#F2B33D", "#F2B33D")),
		badgeErr:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("#FFFFFF")).Background(fg("#C0392B", "#B03A2E")),
		stale:      lipgloss.NewStyle().Foreground(fg("#B35C00", "#FFA657")),
		dim:        lipgloss.NewStyle().Foreground(fg("#8A8A8A", "#6E6E6E")),
		ok:         lipgloss.NewStyle().Foreground(fg("#1E7B34", "#56D364")),
		header:     lipgloss.NewStyle().Bold(true).Foreground(fg("#3A3A3A", "#C9D1D9")),
		cursor:     lipgloss.NewStyle().Reverse(true),
		marked:     lipgloss.NewStyle().Bold(true).Foreground(fg("#B8860B", "#F2CC60")),
		restricted: lipgloss.NewStyle().Foreground(fg("#C0392B", "#FF7B72")),
		calm:       lipgloss.NewStyle().Foreground(fg("#1E7B34", "#56D364")),
		rough:      lipgloss.NewStyle().Foreground(fg("#C0392B", "#FF7B72")),
		footerMsg:  lipgloss.NewStyle().Foreground(fg("#0B5CAD", "#79C0FF")),
		footerErr:  lipgloss.NewStyle().Bold(true).Foreground(fg("#C0392B", "#FF7B72")),
		filter:     lipgloss.NewStyle().Foreground(fg("#0B5CAD", "#79C0FF")),
		help:       help.DefaultStyles(isDark),
	}
	s.pCursor, s.pMarked, s.pRestricted = newPaint(s.cursor.Render), newPaint(s.marked.Render), newPaint(s.restricted.Render)
	s.pCalm, s.pRough = newPaint(s.calm.Render), newPaint(s.rough.Render)
	if isDark {
		s.series = []asciigraph.AnsiColor{asciigraph.Cyan, asciigraph.Yellow, asciigraph.Magenta,
			asciigraph.Lime, asciigraph.Red, asciigraph.DodgerBlue, asciigraph.Orange, asciigraph.White}
	} else {
		s.series = []asciigraph.AnsiColor{asciigraph.Blue, asciigraph.DarkOrange, asciigraph.DarkMagenta,
			asciigraph.Green, asciigraph.Red, asciigraph.Teal, asciigraph.Olive, asciigraph.Maroon}
	}
	for _, c := range s.series {
		s.seriesStyle = append(s.seriesStyle, lipgloss.NewStyle().Foreground(lipgloss.ANSIColor(uint8(c))))
	}
	return s
}

// seriesColor returns the chart colour of the i-th pool.
func (s styles) seriesColor(i int) (asciigraph.AnsiColor, lipgloss.Style) {
	n := len(s.series)
	return s.series[i%n], s.seriesStyle[i%n]
}
