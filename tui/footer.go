package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"
)

// maxNoticeLines: a refusal's end says what is accepted, so it wraps, not cut.
const maxNoticeLines = 3

// setNotice shows or clears the footer message and resizes the views.
func (m *Model) setNotice(n noticeMsg) {
	had := m.footerHeight()
	m.notice = n
	if m.footerHeight() != had {
		m.resize()
	}
}

// footerHeight is one line, or the wrapped message.
func (m *Model) footerHeight() int {
	if m.c.height <= 0 {
		return 0
	}
	n := 1
	if m.notice.text != "" {
		n = min(len(m.noticeLines()), maxNoticeLines)
	}
	// The header and one row of the view come first on a tiny terminal.
	return max(min(n, m.c.height-m.headerHeight()-1), 1)
}

func (m *Model) noticeLines() []string {
	return strings.Split(ansi.Wrap(m.notice.text, max(m.c.width, 1), ""), "\n")
}

// footerLines are the message, else the view's keys cut to fit, then tab, ?
// and q, never cut.
func (m *Model) footerLines() []string {
	st := &m.c.styles
	w, n := m.c.width, m.footerHeight()
	if m.notice.text != "" {
		lines := m.noticeLines()
		if len(lines) > n {
			lines = lines[:n]
			lines[n-1] = ansi.Truncate(lines[n-1]+" …", w, "…")
		}
		style := st.footerMsg
		if m.notice.err {
			style = st.footerErr
		}
		for i, l := range lines {
			lines[i] = style.Render(fit(l, w, false))
		}
		return lines
	}
	own := m.views[m.active].KeyMap().ShortHelp()
	if c, ok := m.views[m.active].(confirmer); ok && c.box().open {
		own = c.box().keys().short
	}
	if m.capturing() {
		// tab, ? and q are text or answers here, not commands.
		return []string{m.shortHelp(own, w)}
	}
	g := m.c.keys
	global := m.shortHelp([]key.Binding{g.NextView, g.Help, g.Quit}, w)
	sep := m.help.Styles.ShortSeparator.Inline(true).Render(m.help.ShortSeparator)
	room := w - cellWidth(global) - cellWidth(sep)
	mine := ""
	if room >= 8 {
		mine = m.shortHelp(own, room)
	}
	if mine == "" {
		return []string{global}
	}
	return []string{mine + sep + global}
}

// shortHelp cuts to w cells: bubbles' ShortHelpView adds every remaining key
// once its ellipsis no longer fits.
func (m *Model) shortHelp(bindings []key.Binding, w int) string {
	st := m.help.Styles
	sep := st.ShortSeparator.Inline(true).Render(m.help.ShortSeparator)
	tail := " " + st.Ellipsis.Inline(true).Render(m.help.Ellipsis)
	var b strings.Builder
	used := 0
	for _, kb := range bindings {
		if !kb.Enabled() {
			continue
		}
		item := st.ShortKey.Inline(true).Render(kb.Help().Key) + " " + st.ShortDesc.Inline(true).Render(kb.Help().Desc)
		if used > 0 {
			item = sep + item
		}
		iw := cellWidth(item)
		if used+iw > w {
			if used > 0 && used+cellWidth(tail) <= w {
				b.WriteString(tail)
			}
			break
		}
		b.WriteString(item)
		used += iw
	}
	return b.String()
}
