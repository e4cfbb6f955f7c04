package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// compactBelow is the height under which the header takes one line.
const compactBelow = 14

func (m *Model) headerHeight() int {
	if m.c.height <= 0 {
		return 0
	}
	if m.c.height < compactBelow {
		return 1
	}
	n := 1
	if len(m.c.idleAlerts) > 0 {
		n++
	}
	if m.snap != nil {
		n += len(m.snap.Sources)
	} else if m.opt.Hub != nil {
		n++
	}
	return min(n, m.c.height)
}

// simulated shows the badge even before the first snapshot.
func (m *Model) simulated() bool {
	if m.snap != nil && (m.snap.Simulated() || m.simPools) {
		return true
	}
	if m.opt.Hub != nil {
		for _, p := range m.opt.Hub.Providers() {
			if p.Describe().Simulated {
				return true
			}
		}
	}
	return false
}

func (m *Model) header() string {
	st := &m.c.styles
	w := m.c.width
	title := m.titleLine(w)
	var sources []feed.SourceStatus
	if m.snap != nil {
		sources = m.snap.Sources
	}
	if m.headerHeight() == 1 {
		var b strings.Builder
		b.WriteString(title)
		if n := len(m.c.idleAlerts); n > 0 {
			b.WriteString("  " + st.badgeErr.Render(fmt.Sprintf("%d idle", n)))
		}
		for _, s := range sources {
			b.WriteString("  " + m.sourceWord(s))
		}
		return clipLine(b.String(), w)
	}
	lines := []string{clipLine(title, w)}
	if a := m.c.idleAlerts; len(a) > 0 {
		lines = append(lines, clipLine(st.footerErr.Render(idleAlertLine(a)), w))
	}
	if m.snap == nil {
		lines = append(lines, st.dim.Render(clipLine(m.spin.View()+" connecting to the market…", w)))
	}
	for _, s := range sources {
		lines = append(lines, clipLine(m.sourceLine(s), w))
	}
	return strings.Join(lines[:min(len(lines), m.headerHeight())], "\n")
}

// titleLine says the title, tabs, badges and data time shorter step by step
// until it fits w: at 80 columns every part is read whole, never cut.
func (m *Model) titleLine(w int) string {
	st := &m.c.styles
	var updated time.Time
	if m.snap != nil {
		updated = m.snap.Taken.In(m.c.now().Location())
	}
	type form struct {
		name, badge, updated, clock string
		shortAlert                  bool
	}
	forms := []form{
		{"gpumarket", " SIMULATED MARKET ", "updated ", "15:04:05", false},
		{"gpumarket", " SIMULATED ", "updated ", "15:04:05", false},
		{"gpumarket", " SIMULATED ", "", "15:04:05", false},
		{"gpumarket", " SIMULATED ", "", "15:04:05", true},
		// At 80 columns the name goes before the badge is cut.
		{"", " SIMULATED ", "", "15:04:05", true},
		{"gpumarket", " SIM ", "", "15:04", true},
		{"", " SIM ", "", "15:04", true},
	}
	var line string
	sim := m.simulated()
	for _, f := range forms {
		var b strings.Builder
		if f.name != "" {
			b.WriteString(st.title.Render(f.name))
			b.WriteString(" ")
		}
		for i, v := range m.views {
			if i > 0 || f.name != "" {
				b.WriteString(" ")
			}
			if i == m.active {
				title := v.Title()
				if st.noColor { // no underline to tell it by
					title = "[" + title + "]"
				}
				b.WriteString(st.activeTab.Render(title))
			} else {
				b.WriteString(st.tab.Render(v.Title()))
			}
		}
		// Two writes, not a concatenation: the frame's hot path.
		if sim {
			b.WriteString("  ")
			b.WriteString(st.badgeSim.Render(f.badge))
		}
		if badge := m.alertBadge(f.shortAlert); badge != "" {
			b.WriteString("  ")
			b.WriteString(badge)
		}
		if m.readOnly() {
			b.WriteString("  ")
			b.WriteString(st.dim.Render("read-only"))
		}
		if !updated.IsZero() {
			b.WriteString("  ")
			b.WriteString(st.dim.Render(f.updated + updated.Format(f.clock)))
		}
		line = b.String()
		if cellWidth(line) <= w {
			break
		}
	}
	return line
}

func (m *Model) sourceWord(s feed.SourceStatus) string {
	st := &m.c.styles
	cached := m.cachedMark(s)
	switch {
	case s.State == feed.StateError:
		return st.badgeErr.Render(s.Provider+" ✗") + st.stale.Render(cached)
	case s.State == feed.StateLoading:
		return s.Provider + " " + m.spin.View() + st.stale.Render(cached)
	case cached != "":
		return st.stale.Render(s.Provider + cached)
	case s.Stale:
		return st.stale.Render(s.Provider + " stale")
	case failedRegions(s) > 0:
		return s.Provider + st.badgeErr.Render(fmt.Sprintf(" %d✗", failedRegions(s)))
	}
	return s.Provider + st.ok.Render(" ●")
}

// cachedMark is " cached HH:MM" while some prices are the history cache's.
func (m *Model) cachedMark(s feed.SourceStatus) string {
	if s.CachedAt.IsZero() {
		return ""
	}
	return " cached " + s.CachedAt.In(m.c.now().Location()).Format("15:04")
}

// sourceLoading: the source, or one of its regions, is loading.
func sourceLoading(s feed.SourceStatus) bool {
	return s.State == feed.StateLoading || slices.ContainsFunc(s.Regions, feed.RegionStatus.Loading)
}

func failedRegions(s feed.SourceStatus) int {
	n := 0
	for _, r := range s.Regions {
		if r.Err != "" {
			n++
		}
	}
	return n
}

// sourceLine is a source's full status: state, progress, badges, staleness.
func (m *Model) sourceLine(s feed.SourceStatus) string {
	st := &m.c.styles
	var b strings.Builder
	b.WriteString(fmt.Sprintf("%-6s", s.Provider))
	done, total, loading := 0, 0, sourceLoading(s)
	for _, r := range s.Regions {
		done += min(r.Done, r.Total)
		total += r.Total
	}
	failed := failedRegions(s)
	cached := m.cachedMark(s) // said after the state, unless it is the state
	switch {
	case s.State == feed.StateError:
		b.WriteString(st.badgeErr.Render(" error "))
		if s.Err != "" {
			b.WriteString(" " + st.footerErr.Render(shortErr("", s.Err, 60)))
		}
	case loading:
		b.WriteString(m.spin.View() + " loading")
	case s.Stale:
		b.WriteString(st.stale.Render("◌ stale"))
		if !s.LastOK.IsZero() {
			b.WriteString(st.stale.Render(" (data from " + s.LastOK.In(m.c.now().Location()).Format("15:04") + ")"))
		}
	case failed > 0 && failed == len(s.Regions):
		b.WriteString(st.badgeErr.Render(" no region answers "))
	case cached != "":
		b.WriteString(st.stale.Render("◌" + cached))
		cached = ""
	default:
		b.WriteString(st.ok.Render("● live"))
	}
	if cached != "" {
		b.WriteString(st.stale.Render(" ·" + cached))
	}
	if total > 0 && done < total {
		b.WriteString(" " + progressBar(done, total, 16) + fmt.Sprintf(" %d/%d", done, total))
	} else if n := len(s.Regions); n > 0 {
		b.WriteString(st.dim.Render(" · " + plural(n, "region")))
	}
	// One badge per cause, naming its regions, not thirty copies.
	var causes []string
	regionsOf := map[string][]string{}
	for _, r := range s.Regions {
		if r.Err != "" {
			c := shortErr(r.Region, r.Err, 48)
			if _, ok := regionsOf[c]; !ok {
				causes = append(causes, c)
			}
			regionsOf[c] = append(regionsOf[c], r.Region)
		}
	}
	for _, c := range causes {
		b.WriteString(" ")
		b.WriteString(st.badgeErr.Render(" " + strings.Join(regionsOf[c], " ") + " "))
		b.WriteString(" " + st.footerErr.Render(c))
	}
	if s.Note != "" {
		b.WriteString(st.dim.Render(" · " + s.Note))
	}
	return b.String()
}

func progressBar(done, total, w int) string {
	if total <= 0 || w <= 0 {
		return ""
	}
	fill := done * w / total
	return "▕" + strings.Repeat("█", fill) + strings.Repeat("░", w-fill) + "▏"
}

// shortErr keeps an error's cause for a badge, cut to n runes.
func shortErr(region, s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	for region != "" {
		i := strings.Index(s, ": ")
		if i < 0 || !strings.Contains(s[:i], region) {
			break
		}
		s = s[i+2:]
	}
	// The AWS SDK puts the cause last ("… api error UnauthorizedOperation: …").
	if i := strings.Index(s, "api error "); i >= 0 {
		s = s[i+len("api error "):]
	} else if strings.HasPrefix(s, "operation error ") {
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
	}
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// idleAlertLine names the capacity idle past budget.max_idle_pct, most first.
func idleAlertLine(a []ledger.Alert) string {
	top := slices.MaxFunc(a, func(x, y ledger.Alert) int { return cmp.Compare(x.IdlePct, y.IdlePct) })
	s := fmt.Sprintf("⚠ idle: %s %s GPU %s %.0f%% idle (budget %.0f%%)", short(top.Row.ID), present.GPUCount(top.Row.GPUs),
		present.DisplayType(top.Row.InstanceType), top.IdlePct, top.MaxPct)
	if len(a) > 1 {
		s += fmt.Sprintf(" and %d more", len(a)-1)
	}
	return s + " · Usage tab"
}

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
