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

// common is what one session's views share; nothing here is global.
type common struct {
	width, height int
	styles        styles
	keys          globalKeys
	logger        *slog.Logger

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
	// picker is the Market's picks, which the Chart and Fleet view show.
	picker poolPicker
	// idleAlerts are the rows idle past budget.max_idle_pct, for the header.
	idleAlerts []ledger.Alert
	// watch is the process's alert evaluator; nil when the session has none.
	watch *watch.Evaluator
}

// poolPicker is the Market view as the views that act on its picks see it.
type poolPicker interface {
	// picked returns the marked pools in mark order (marked), else the cursor's.
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
