// Package tui is gpumarket's terminal UI: one Bubble Tea model per session
// over the views, fed by the hub and the watch's alerts.
package tui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"

	"github.com/gpumarket/gpumarket/watch"
)

// Role is what a session may do.
type Role int

const (
	// RoleBooker may spend money after confirmation.
	RoleBooker Role = iota
	// RoleViewer is a read-only SSH session.
	RoleViewer
)

// Options configure one TUI session.
type Options struct {
	// Hub is the market feed; the caller runs it (feed.Run).
	Hub *feed.Hub
	// Window is the initial history window (default 24h).
	Window time.Duration
	// GPUs and Regions are the initial filters; empty shows everything.
	GPUs, Regions []string
	// Effective is the job the EFF $/GPU-H column prices pools for; zero means planner.DefaultBasis.
	Effective planner.Basis
	// Speeds are the Plan view's relative GPU speeds; nil means planner.DefaultSpeeds.
	Speeds planner.Speeds
	Role   Role
	// Actor is who is at the keyboard, for the ledger ("local:alice").
	Actor string
	// NoColor turns every colour and text attribute off (NO_COLOR).
	NoColor bool
	// Now is the clock; its Location is the chart's time zone.
	Now func() time.Time
	// Context is the session's context; the hub subscription ends with it.
	Context context.Context
	// Booking runs every money-spending action; nil means nothing can be booked.
	Booking *ledger.Service
	// Usage is the process's one usage tracker; nil means no ledger.
	Usage *ledger.Tracker
	// Watch is the process's one alert evaluator; nil means no Alerts view.
	Watch *watch.Evaluator
	// Shared is derived from the market once per process; nil gives one per session.
	Shared *Shared
}

// Messages between the root and its views.
type (
	snapshotMsg  struct{ snap *feed.Snapshot }
	subClosedMsg struct{}
	// capped, when set, is why the window is not the one asked for.
	windowChangedMsg struct{ capped string }
	stylesChangedMsg struct{}
	// noticeMsg is a transient footer message.
	noticeMsg struct {
		text string
		err  bool
		// scoped news (a filter, the window) goes when another view is shown.
		scoped bool
	}
	noticeExpiredMsg struct{ id int }
)

func notify(text string) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: text} }
}

// notifyHere is notify for news about the view on screen.
func notifyHere(text string) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: text, scoped: true} }
}

// notifyErrHere is notifyErr for news about the view on screen.
func notifyErrHere(err error) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: err.Error(), err: true, scoped: true} }
}

// notifyErr shows an error in the footer: never a panic or a print.
func notifyErr(err error) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: err.Error(), err: true} }
}

const noticeFor = 4 * time.Second

// Model is the root of one TUI session.
type Model struct {
	opt   Options
	c     *common
	views []view
	// market is home: esc goes back to it; the Chart and Fleet act on its picks.
	market *marketView
	active int
	prev   int

	sub     <-chan *feed.Snapshot
	snap    *feed.Snapshot
	spin    spinner.Model
	spinOn  bool
	help    help.Model
	full    bool
	notice  noticeMsg
	noticeN int
	// simPools: any pool is simulated, whatever its source is called.
	simPools bool

	// alertSeen is the newest alert told; unseen counts those not yet seen.
	alertSub  <-chan struct{}
	alertSeen int64
	unseen    int
}

// New builds a session's model; it subscribes in Init.
func New(opt Options) *Model {
	domain.OrDefault(&opt.Window, 24*time.Hour)
	opt.Window = min(opt.Window, domain.MaxWindow)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Context == nil {
		opt.Context = context.Background()
	}
	if opt.Effective.GPUs == 0 {
		opt.Effective = planner.DefaultBasis
	}
	if opt.Shared == nil {
		opt.Shared = NewShared()
	}
	c := &common{
		styles: newStyles(true, opt.NoColor),
		keys:   newGlobalKeys(),
		hub:    opt.Hub,
		eff:    opt.Effective,
		now:    opt.Now,
		window: opt.Window,
		role:   opt.Role,
		actor:  opt.Actor,
		after:  tea.Tick,
		watch:  opt.Watch,
	}
	m := &Model{opt: opt, c: c}
	// The views, in tab order.
	m.market = addView(m, newMarket(c, opt.Shared, opt.GPUs, opt.Regions))
	addView(m, newChart(c))
	addView(m, newBlocksView(c, opt.Context, opt.Booking, opt.GPUs))
	addView(m, newPlanView(c, opt.Context, opt.Booking, opt.Speeds, opt.GPUs, opt.Regions))
	addView(m, newFleetView(c, opt.Context, opt.Booking))
	addView(m, newLedgerView(c, opt.Context, opt.Booking))
	addView(m, newUsageView(c, opt.Context, opt.Usage))
	if opt.Watch != nil {
		addView(m, newAlertsView(c, opt.Context, opt.Watch))
	}
	c.market = m.market
	m.spin = spinner.New(spinner.WithSpinner(spinner.MiniDot))
	m.help = help.New()
	m.applyStyles()
	return m
}

// addView adds a tab and gives the view the id its results come back by.
func addView[V view](m *Model, v V) V {
	if o, ok := any(v).(interface{ setID(viewID) }); ok {
		o.setID(viewID(len(m.views)))
	}
	m.views = append(m.views, v)
	return v
}

func (m *Model) applyStyles() {
	m.help.Styles = m.c.styles.help
	m.spin.Style = m.c.styles.ok
	m.market.applyStyles()
}

// readOnly: the header says so and the confirmation refuses money keys.
func (m *Model) readOnly() bool { return m.c.role == RoleViewer }

// Init subscribes to the hub and asks the terminal for its background.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{tea.RequestBackgroundColor}
	if m.opt.Hub != nil && m.sub == nil {
		m.sub = m.opt.Hub.Subscribe(m.opt.Context)
		cmds = append(cmds, waitSnapshot(m.sub))
	}
	cmds = append(cmds, m.initAlerts())
	return tea.Batch(cmds...)
}

func waitSnapshot(ch <-chan *feed.Snapshot) tea.Cmd {
	return func() tea.Msg {
		s, ok := <-ch
		if !ok {
			return subClosedMsg{}
		}
		return snapshotMsg{snap: s}
	}
}

func (m *Model) bodyHeight() int {
	return max(m.c.height-m.headerHeight()-m.footerHeight(), 0)
}

func (m *Model) resize() {
	for _, v := range m.views {
		v.SetSize(m.c.width, m.bodyHeight())
		if c, ok := v.(confirmer); ok {
			c.box().setSize(m.c.width, m.bodyHeight())
		}
	}
	m.help.SetWidth(m.c.width)
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.c.width, m.c.height = max(msg.Width, 0), max(msg.Height, 0)
		m.resize()
		return m, nil
	case tea.BackgroundColorMsg:
		m.c.styles = newStyles(msg.IsDark(), m.opt.NoColor)
		m.applyStyles()
		return m, m.broadcast(stylesChangedMsg{})
	case snapshotMsg:
		hadHeader := m.headerHeight()
		m.snap = msg.snap
		m.simPools = false
		for i := 0; m.snap != nil && i < len(m.snap.Pools) && !m.simPools; i++ {
			m.simPools = m.snap.Pools[i].Simulated
		}
		cmds := []tea.Cmd{m.broadcast(msg)}
		if m.headerHeight() != hadHeader {
			m.resize()
		}
		if m.sub != nil {
			cmds = append(cmds, waitSnapshot(m.sub))
		}
		if m.loading() && !m.spinOn {
			m.spinOn = true
			cmds = append(cmds, m.spin.Tick)
		}
		return m, tea.Batch(cmds...)
	case alertsMsg:
		return m, m.onAlerts()
	case alertsClosedMsg:
		m.alertSub = nil
		return m, nil
	case alertsSeenMsg:
		m.unseen = 0
		return m, nil
	case subClosedMsg:
		m.sub = nil
		return m, notifyErr(errors.New("the market feed has stopped; the prices shown are the last known"))
	case spinner.TickMsg:
		// Let the ticks die when idle, so an idle session sends nothing.
		if !m.loading() {
			m.spinOn = false
			return m, nil
		}
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case windowChangedMsg:
		text := "window: " + windowLabel(m.c.window)
		if msg.capped != "" {
			text = msg.capped
		}
		return m, tea.Batch(m.broadcast(msg), notifyHere(text))
	case noticeMsg:
		m.setNotice(msg)
		m.noticeN++
		id := m.noticeN
		return m, m.c.after(noticeFor, func(time.Time) tea.Msg { return noticeExpiredMsg{id: id} })
	case noticeExpiredMsg:
		if msg.id == m.noticeN {
			m.setNotice(noticeMsg{})
		}
		return m, nil
	case resultMsg:
		if i := int(msg.to); i >= 0 && i < len(m.views) {
			hadHeader := m.headerHeight()
			v, cmd := m.views[i].Update(msg.msg)
			m.views[i] = v
			if m.headerHeight() != hadHeader {
				m.resize() // an idle alert came or went
			}
			return m, cmd
		}
		return m, nil
	case openPoolsMsg:
		return m, openIn(m, func(s poolShower) { s.showPools(msg.keys) })
	case openPlanMsg:
		return m, openIn(m, func(o planOpener) { o.openPlan(msg.seed) })
	case backMsg:
		return m, m.switchTo(m.prev)
	case tea.KeyPressMsg:
		return m.updateKey(msg)
	}
	v, cmd := m.views[m.active].Update(msg)
	m.views[m.active] = v
	return m, cmd
}

func (m *Model) updateKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	g := m.c.keys
	if msg.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if !m.capturing() {
		switch {
		case key.Matches(msg, g.Quit):
			return m, tea.Quit
		case key.Matches(msg, g.Help):
			m.full = !m.full
			return m, nil
		case m.full && key.Matches(msg, g.Back):
			m.full = false
			return m, nil
		case key.Matches(msg, g.NextView):
			return m, m.switchTo((m.active + 1) % len(m.views))
		case key.Matches(msg, g.PrevView):
			return m, m.switchTo((m.active + len(m.views) - 1) % len(m.views))
		}
		// esc with nothing open goes home; the Chart's esc returns where it came from.
		if _, ok := m.views[m.active].(escHomer); ok && key.Matches(msg, g.Back) {
			return m, m.switchTo(m.indexOf(m.market))
		}
		if _, ok := m.views[m.active].(marketFilterer); ok && key.Matches(msg, g.Filter) {
			m.switchTo(m.indexOf(m.market))
		}
	}
	v, cmd := m.views[m.active].Update(msg)
	m.views[m.active] = v
	return m, cmd
}

// capturing: a text input or a confirmation takes every key.
func (m *Model) capturing() bool {
	v := m.views[m.active]
	if c, ok := v.(confirmer); ok && c.box().open {
		return true
	}
	c, ok := v.(capturer)
	return ok && c.capturing()
}

func (m *Model) indexOf(v view) int { return max(slices.Index(m.views, v), 0) }

// openIn gives the first view that is a T to do, then shows it.
func openIn[T any](m *Model, do func(T)) tea.Cmd {
	for i, v := range m.views {
		if t, ok := v.(T); ok {
			do(t)
			return m.switchTo(i)
		}
	}
	return nil
}

func (m *Model) switchTo(i int) tea.Cmd {
	if i == m.active || i < 0 || i >= len(m.views) {
		return nil
	}
	m.prev, m.active = m.active, i
	m.full = false
	if m.notice.scoped {
		m.setNotice(noticeMsg{})
	}
	if s, ok := m.views[i].(shower); ok {
		return s.shown()
	}
	return nil
}

// broadcast: hidden views need snapshots and window and style changes too.
func (m *Model) broadcast(msg tea.Msg) tea.Cmd {
	var cmds []tea.Cmd
	for i, v := range m.views {
		nv, cmd := v.Update(msg)
		m.views[i] = nv
		cmds = append(cmds, cmd)
	}
	return tea.Batch(cmds...)
}

func (m *Model) loading() bool {
	if m.snap == nil {
		return m.opt.Hub != nil
	}
	return slices.ContainsFunc(m.snap.Sources, sourceLoading)
}

// View renders the frame: header, the active view, footer. Only here is
// the size checked: a view is drawn only with cells to draw in.
func (m *Model) View() tea.View {
	var v tea.View
	v.AltScreen = true
	v.WindowTitle = "gpumarket"
	w, h := m.c.width, m.c.height
	if w <= 0 || h <= 0 {
		return v
	}
	var b strings.Builder
	b.WriteString(m.header())
	bh := m.bodyHeight()
	if bh > 0 {
		b.WriteString("\n")
		var body string
		active := m.views[m.active]
		if c, ok := active.(confirmer); ok && c.box().open {
			body = c.box().view(&m.c.styles, w, bh)
		} else if m.full {
			body = m.help.FullHelpView(active.KeyMap().FullHelp())
			if n, ok := active.(helpNoter); ok {
				body += "\n\n" + m.c.styles.dim.Render(wordwrap(n.helpNote(), w))
			}
		} else {
			body = active.View()
		}
		b.WriteString(clip(body, w, bh))
	}
	if h > m.headerHeight() {
		b.WriteString("\n")
		b.WriteString(strings.Join(m.footerLines(), "\n"))
	}
	v.SetContent(clip(b.String(), w, h))
	return v
}

// Run runs a session in the alternate screen until quit or ctx ends.
func Run(ctx context.Context, opt Options, popts ...tea.ProgramOption) error {
	if opt.Context == nil {
		opt.Context = ctx
	}
	sub, cancel := context.WithCancel(opt.Context)
	defer cancel()
	opt.Context = sub
	p := tea.NewProgram(New(opt), append([]tea.ProgramOption{tea.WithContext(ctx)}, popts...)...)
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // the caller ended the session
	}
	return err
}
