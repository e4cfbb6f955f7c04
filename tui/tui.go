// Package tui is gpumarket's terminal UI: a Bubble Tea root model over
// views (Market, Chart, Blocks, Plan, Fleet, Ledger, Usage, Alerts) fed by
// a hub subscription and the watch's alerts.
// One Model serves one session; nothing is shared between sessions but the
// hub and the booking service.
package tui

import (
	"context"
	"errors"
	"log/slog"
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
	// RoleBooker is the local user (or an SSH user granted booking): may
	// spend money after confirmation.
	RoleBooker Role = iota
	// RoleViewer is a read-only SSH session: it watches the market and
	// cannot book or launch anything.
	RoleViewer
)

// Options configure one TUI session.
type Options struct {
	// Hub is the market feed; the model subscribes to it. The caller runs
	// it (feed.Run).
	Hub *feed.Hub
	// Window is the initial history window (default 24h).
	Window time.Duration
	// GPUs and Regions are the initial filters; empty shows everything.
	GPUs, Regions []string
	// Effective is the job the EFF $/GPU-H column prices pools for
	// (config plan.*); the zero value means planner.DefaultBasis. The
	// Plan view's form starts from it too.
	Effective planner.Basis
	// Speeds are the GPU models' relative speeds the Plan view plans
	// with (config plan.speed); nil means planner.DefaultSpeeds.
	Speeds planner.Speeds
	Role   Role
	// Actor is who is at the keyboard, for the ledger ("local:alice",
	// "ssh:SHA256:… alice@laptop").
	Actor string
	// NoColor turns every colour and text attribute off (NO_COLOR).
	NoColor bool
	// Now is the clock (default time.Now); its Location is the zone the
	// chart's time labels are in.
	Now func() time.Time
	// Context is the session's context; the hub subscription ends with it.
	Context context.Context
	// Logger receives diagnostics; it must not write to the terminal.
	Logger *slog.Logger
	// Booking runs every money-spending action through the ledger; nil
	// means the Blocks, Fleet and Ledger views say nothing can be booked
	// here.
	Booking *ledger.Service
	// Usage reports what was bought and how much of it was used (the
	// Usage view, the header's idle alert); one tracker serves every
	// session of a process. Nil: the view says there is no ledger.
	Usage *ledger.Tracker
	// Watch is the process's one evaluator of the alert rules, shared by
	// every session (alerts.go); nil means no Alerts view.
	Watch *watch.Evaluator
	// Shared is what the process's sessions derive from the market once
	// for all of them (NewShared, one per process); nil gives the session
	// one of its own.
	Shared *Shared
}

// Messages between the root and its views.
type (
	snapshotMsg  struct{ snap *feed.Snapshot }
	subClosedMsg struct{}
	// windowChangedMsg says the window changed; capped, when set, is why
	// it is not the one asked for.
	windowChangedMsg struct{ capped string }
	stylesChangedMsg struct{}
	// noticeMsg is a transient footer message.
	noticeMsg struct {
		text string
		err  bool
		// scoped is news about the view on screen (a filter, a sort, the
		// window): it goes when another view is shown, where it would be
		// stale ("region: ap-south-1" under the Ledger).
		scoped bool
	}
	noticeExpiredMsg struct{ id int }
)

// notify returns a command that shows text in the footer for a while.
func notify(text string) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: text} }
}

// notifyHere is notify for news about the view on screen, which showing
// another view clears.
func notifyHere(text string) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: text, scoped: true} }
}

// notifyErrHere is notifyErr for a refusal of what the view on screen
// holds (its form, its marks), which showing another view clears.
func notifyErrHere(err error) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: err.Error(), err: true, scoped: true} }
}

// notifyErr shows an error in the footer: errors are messages, never panics
// or prints.
func notifyErr(err error) tea.Cmd {
	return func() tea.Msg { return noticeMsg{text: err.Error(), err: true} }
}

// noticeFor is how long a footer message stays.
const noticeFor = 4 * time.Second

// Model is the root of one TUI session. It implements tea.Model.
type Model struct {
	opt   Options
	c     *common
	views []view
	// market is home: esc goes back to it, / filters it, the Chart and
	// the Fleet view act on its picks.
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
	isDark  bool
	// simPools is set when any pool of the snapshot is simulated, whatever
	// its source is called: the badge must not depend on a name.
	simPools bool

	// alertSub wakes the session when the watch has alerts; alertSeen is
	// the newest alert it has been told, unseen how many it has not seen
	// in the Alerts view (the header's badge).
	alertSub  <-chan struct{}
	alertSeen int64
	unseen    int
}

// New builds a session's model. It does not subscribe until Init.
func New(opt Options) *Model {
	if opt.Window <= 0 {
		opt.Window = 24 * time.Hour
	}
	if opt.Window > domain.MaxWindow {
		opt.Window = domain.MaxWindow
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Context == nil {
		opt.Context = context.Background()
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
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
		logger: opt.Logger,
		hub:    opt.Hub,
		eff:    opt.Effective,
		now:    opt.Now,
		window: opt.Window,
		role:   opt.Role,
		actor:  opt.Actor,
		after:  tea.Tick,
		watch:  opt.Watch,
	}
	m := &Model{opt: opt, c: c, isDark: true}
	// The views, in tab order: a new view is one line here.
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
	c.picker = m.market
	m.spin = spinner.New(spinner.WithSpinner(spinner.MiniDot))
	m.help = help.New()
	m.applyStyles()
	return m
}

// addView adds a view to the session's tabs and gives it its id, with
// which its commands' results come back to it.
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

// readOnly reports whether this session may not spend money (the header
// says so; the confirmation refuses every money key).
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

// waitSnapshot receives one snapshot; the root re-arms it after each.
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
		// The box is shown in the body in the view's place.
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
		m.isDark = msg.IsDark()
		m.c.styles = newStyles(m.isDark, m.opt.NoColor)
		m.applyStyles()
		return m, m.broadcast(stylesChangedMsg{})
	case snapshotMsg:
		hadHeader := m.headerHeight()
		m.snap = msg.snap
		m.simPools = false
		if m.snap != nil {
			for i := range m.snap.Pools {
				if m.snap.Pools[i].Simulated {
					m.simPools = true
					break
				}
			}
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
		// Let the chain of ticks die when nothing loads, so an idle
		// session sends nothing over the wire.
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
		// To the view that asked, shown or not.
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
		for i, v := range m.views {
			if s, ok := v.(poolShower); ok {
				s.showPools(msg.keys)
				return m, m.switchTo(i)
			}
		}
		return m, nil
	case openPlanMsg:
		for i, v := range m.views {
			if o, ok := v.(planOpener); ok {
				o.openPlan(msg.seed)
				return m, m.switchTo(i)
			}
		}
		return m, nil
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
		// esc, with no form or confirmation open, goes home; the Chart's
		// esc returns to where enter came from.
		if _, ok := m.views[m.active].(escHomer); ok && key.Matches(msg, g.Back) {
			return m, m.switchTo(m.indexOf(m.market))
		}
		// A view with nothing to filter hands / to the Market, which
		// opens its filter.
		if _, ok := m.views[m.active].(marketFilterer); ok && key.Matches(msg, g.Filter) {
			m.switchTo(m.indexOf(m.market))
		}
	}
	v, cmd := m.views[m.active].Update(msg)
	m.views[m.active] = v
	return m, cmd
}

// capturing reports whether the active view wants every key: a text
// input, or a confirmation, is open.
func (m *Model) capturing() bool {
	v := m.views[m.active]
	if c, ok := v.(confirmer); ok && c.box().open {
		return true
	}
	c, ok := v.(capturer)
	return ok && c.capturing()
}

func (m *Model) indexOf(v view) int {
	for i, x := range m.views {
		if x == v {
			return i
		}
	}
	return 0
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

// broadcast gives a message to every view (snapshots, window and style
// changes concern hidden views too).
func (m *Model) broadcast(msg tea.Msg) tea.Cmd {
	var cmds []tea.Cmd
	for i, v := range m.views {
		nv, cmd := v.Update(msg)
		m.views[i] = nv
		cmds = append(cmds, cmd)
	}
	return tea.Batch(cmds...)
}

// loading reports whether any source is still back-filling.
func (m *Model) loading() bool {
	if m.snap == nil {
		return m.opt.Hub != nil
	}
	for _, s := range m.snap.Sources {
		if s.State == feed.StateLoading {
			return true
		}
		for _, r := range s.Regions {
			if r.Loading() {
				return true
			}
		}
	}
	return false
}

// View renders the frame: header, the active view, footer.
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
				// Wrapped, not clipped: the notes are sentences.
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

// Run runs a session on the terminal (or on the input and output given as
// program options, as the SSH server does) in the alternate screen until
// the user quits or ctx ends. Quitting returns nil and leaves the terminal
// as it was.
func Run(ctx context.Context, opt Options, popts ...tea.ProgramOption) error {
	if opt.Context == nil {
		opt.Context = ctx
	}
	sub, cancel := context.WithCancel(opt.Context)
	defer cancel()
	opt.Context = sub
	p := tea.NewProgram(New(opt), append([]tea.ProgramOption{tea.WithContext(ctx)}, popts...)...)
	_, err := p.Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // the caller ended the session
	}
	if err != nil {
		return err
	}
	return nil
}
