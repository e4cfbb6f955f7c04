package tui

import (
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
)

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

type openPoolsMsg struct{ keys []string }

// openPlanMsg asks the root to open the plan of a job on these terms.
type openPlanMsg struct{ seed planSeed }

type backMsg struct{}
