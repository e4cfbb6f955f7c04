package tui

import (
	"slices"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

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
