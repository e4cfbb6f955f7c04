package tui

import (
	"image/color"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
	"github.com/guptarohit/asciigraph"
)

// styles are one session's lipgloss styles. They are built per session, from
// that session's terminal background, so two SSH clients with different
// terminals never share (or overwrite) each other's look.
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

// newStyles builds the styles for a terminal with a dark or light
// background. With noColor every style is plain: no colour and no SGR
// attributes except none at all, so NO_COLOR output carries no escape codes.
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
