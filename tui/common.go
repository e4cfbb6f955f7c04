package tui

import (
	tea "charm.land/bubbletea/v2"
	"log/slog"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/hub"
)

// common is what the views of one session share: size, styles, keys, the
// window and the clock. Each session has its own; nothing here is global.
type common struct {
	width, height int
	styles        styles
	keys          globalKeys
	logger        *slog.Logger

	hub    *hub.Hub
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
// when the new window reaches further back than what it keeps.
func (c *common) cycleWindow() {
	c.setWindow(nextWindow(c.window))
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
	return providers.FormatWindow(d)
}
