package tui

import (
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
)

// view is one screen of the TUI. Adding a view is a type with these
// methods and one line in New (m.add(newXView(c, …))); what else it does
// it declares with the small interfaces below, which the root discovers by
// type assertion (k9s's dao.Nuker is the model), never by its type.
type view interface {
	Update(tea.Msg) (view, tea.Cmd)
	View() string
	SetSize(w, h int)
	KeyMap() help.KeyMap
	Title() string
}

// Capabilities a view may declare.
type (
	// helpNoter has more to say on the full help screen than its keys:
	// what its marks and columns mean.
	helpNoter interface{ helpNote() string }

	// capturer sometimes wants every key (a text input, a confirmation):
	// the root then passes q, tab, ? and esc through instead of acting on
	// them.
	capturer interface{ capturing() bool }

	// shower has work to do when it is shown: the Blocks view's first
	// search (it asks every region of every cloud, so a session that never
	// opens it asks nothing), the Fleet view's taking of the marks as they
	// are now, the Chart's picking of the pool under the cursor.
	shower interface{ shown() tea.Cmd }

	// escHomer goes back to the Market on esc (when nothing of its own is
	// open: capturer says so).
	escHomer interface{ escGoesHome() }

	// marketFilterer has nothing of its own to filter: / opens the
	// Market's filter.
	marketFilterer interface{ slashFiltersMarket() }

	// confirmer runs money actions through a confirmation: while its box
	// is open the root shows the box instead of the view and leaves every
	// key to it.
	confirmer interface{ box() *confirmation }

	// poolShower shows the pools that enter picks in the Market (the
	// Chart): openPoolsMsg goes to it, and it is shown.
	poolShower interface{ showPools(keys []string) }

	// planOpener plans a job with the terms p brings from the Market or
	// the Blocks view (the Plan view): openPlanMsg goes to it, and it is
	// shown.
	planOpener interface{ openPlan(planSeed) }
)

// viewID names a view of one session: its place in the root's list.
type viewID int

// resultMsg is a command's result on its way to the view that asked for
// it: the root hands msg to that view, shown or not (gh-dash's
// TaskFinishedMsg is the model). A view that tabbed out of sight still
// gets its purchase's answer at once.
type resultMsg struct {
	to  viewID
	msg tea.Msg
}

// owner is what a view that runs commands embeds: the root sets its id
// when it adds the view, and every command the view starts through it
// brings its result back to it.
type owner struct{ id viewID }

func (o *owner) setID(id viewID) { o.id = id }

// task runs f off the UI goroutine; its message comes back to this view.
func (o *owner) task(f func() tea.Msg) tea.Cmd {
	id := o.id
	return func() tea.Msg { return resultMsg{to: id, msg: f()} }
}

// after delivers msg to this view after d, through the session's clock
// (c.after, which the tests switch off).
func (o *owner) after(c *common, d time.Duration, msg tea.Msg) tea.Cmd {
	id := o.id
	return c.after(d, func(time.Time) tea.Msg { return resultMsg{to: id, msg: msg} })
}

// openPoolsMsg asks the root to show these pools (enter in the Market).
type openPoolsMsg struct{ keys []string }

// openPlanMsg asks the root to open the plan of a job on these terms (p
// in the Market or the Blocks view).
type openPlanMsg struct{ seed planSeed }

// backMsg asks the root to return to the previous view.
type backMsg struct{}
