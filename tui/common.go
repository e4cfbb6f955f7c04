package tui

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"

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
