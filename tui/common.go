package tui

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/watch"
)

// common is what the views of one session share: size, styles, keys, the
// window and the clock. Each session has its own; nothing here is global.
type common struct {
	width, height int
	styles        styles
	keys          globalKeys
	logger        *slog.Logger

	hub    *feed.Hub
	eff    planner.Basis // the job EFF $/GPU-H is for
	now    func() time.Time
	window time.Duration
	// windowSeq grows every time the window changes, so a view can tell
	// that its derived figures are out of date without comparing windows.
	windowSeq int
	role      Role
	actor     string
	// after is tea.Tick; the Update tests replace it so that running a
	// command never means waiting on a clock.
	after func(time.Duration, func(time.Time) tea.Msg) tea.Cmd
	// picker is what the Market view has picked (its marks, or the pool
	// under its cursor): the Chart and the Fleet view show those pools.
	picker poolPicker
	// idleAlerts are the running rows idle past budget.max_idle_pct, as
	// the Usage view last heard: the header names them.
	idleAlerts []ledger.Alert
	// watch is the process's evaluator of the alert rules; nil when the
	// session has none.
	watch *watch.Evaluator
}

// poolPicker is the Market view as the views that act on its picks see it.
type poolPicker interface {
	// picked returns the marked pools still in the market, in the order
	// they were marked, or else the pool under the cursor; marked is false
	// in the second case.
	picked() (keys []string, marked bool)
}

// picked asks the picker, if the session has one.
func (c *common) picked() (keys []string, marked bool) {
	if c.picker == nil {
		return nil, false
	}
	return c.picker.picked()
}

// windows are the steps `w` cycles through.
var windows = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 90 * 24 * time.Hour}

// nextWindow returns the step after d (the smallest step longer than d),
// wrapping around to the first.
func nextWindow(d time.Duration) time.Duration {
	for _, w := range windows {
		if w > d {
			return w
		}
	}
	return windows[0]
}

// cycleWindow moves to the next window and asks the hub for more history
// when the new window reaches further back than what it keeps. A hub that
// others share (the SSH server's) keeps no more than its MaxWindow: past
// it, the cycle starts again at the first window and says why, so one
// session never makes the hub fetch and hold more for every session.
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

// windowLabel names a window the way people say it: 24h rather than 1d.
func windowLabel(d time.Duration) string {
	if d < 48*time.Hour && d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return domain.FormatWindow(d)
}
