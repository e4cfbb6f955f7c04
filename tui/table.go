package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/present"
)

// shownCol is a column kept by fitTable, at the width it is shown.
type shownCol[R any] struct {
	*present.Col[R]
	w int
}

// fitTable keeps the titled columns that fit in w cells, by priority, and
// gives the cells left over to those that grow.
func fitTable[R any](cols []*present.Col[R], w int) []shownCol[R] {
	keep := make([]bool, len(cols))
	used, last := 0, 0
	for _, c := range cols {
		last = max(last, c.Prio) // a list without some columns keeps the others' priorities
	}
	for p := range last + 1 {
		for i, c := range cols {
			if c.Title != "" && c.Prio == p && used+c.Width+1 <= w+1 {
				keep[i] = true
				used += c.Width + 1
			}
		}
	}
	var out []shownCol[R]
	spare := w + 1 - used
	for i, c := range cols {
		if !keep[i] {
			continue
		}
		s := shownCol[R]{c, c.Width}
		if add := min(spare, c.MaxWidth-c.Width); add > 0 {
			s.w += add
			spare -= add
		}
		out = append(out, s)
	}
	return out
}

// tableHeader is the columns' titles, each fitted to its column.
func tableHeader[R any](cols []shownCol[R]) string {
	hdr := make([]string, len(cols))
	for i, c := range cols {
		hdr[i] = fit(c.Title, c.w, c.Right)
	}
	return strings.Join(hdr, " ")
}

// tableLine is a row's cells, each fitted to its column.
func tableLine[R any](cols []shownCol[R], r R) string {
	line := make([]string, len(cols))
	for i, c := range cols {
		line[i] = fit(c.Cell(r), c.w, c.Right)
	}
	return strings.Join(line, " ")
}

// hiddenCells is the known cells not shown whole, for under the cursor:
// "WHERE us-east-1a · BY alice".
func hiddenCells[R any](all []*present.Col[R], shown []shownCol[R], r R) string {
	var parts []string
	for _, c := range all {
		if c.Title == "" {
			continue
		}
		v := c.Cell(r)
		if w := shownWidth(shown, c); v == "" || v == "-" || cellWidth(v) <= w {
			continue
		}
		parts = append(parts, c.Title+" "+v)
	}
	return strings.Join(parts, " · ")
}

// shownWidth is the width c is shown at, -1 when it is not shown.
func shownWidth[R any](shown []shownCol[R], c *present.Col[R]) int {
	for _, s := range shown {
		if s.Col == c {
			return s.w
		}
	}
	return -1
}

func isShown[R any](shown []shownCol[R], c *present.Col[R]) bool { return shownWidth(shown, c) >= 0 }

// page is the rows [first, end) of n shown in rows lines, cur among them.
func page(cur, n, rows int) (first, end int) {
	first = max(0, min(cur-rows+1, n-rows))
	return first, min(n, first+rows)
}

// pointed is a list's line after lead: the cursor's marked › and in the cursor style.
func (st *styles) pointed(lead, text string, cur bool) string {
	if cur {
		return lead + "› " + st.cursor.Render(text)
	}
	return lead + "  " + text
}

// fit pads or cuts s to exactly w cells. right aligns numbers.
func fit(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	n := cellWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", w-n)
	if right {
		return pad + s
	}
	return s + pad
}

// clip cuts every line of s to w cells and s to h lines, padding it with
// empty lines to exactly h, so a frame never wraps or scrolls the terminal.
func clip(s string, w, h int) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if len(l) > w && cellWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// clipLine cuts a styled line to w cells.
func clipLine(s string, w int) string { return ansi.Truncate(s, w, "") }

// cellWidth is ansi.StringWidth with a fast path for escapes and runes known
// to take one cell: grapheme segmentation dominated the frame time.
func cellWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b { // skip CSI "ESC [ ... final" and other two-byte escapes
			i++
			if i < len(s) && s[i] == '[' {
				i++
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
				i++
				continue
			}
			return ansi.StringWidth(s)
		}
		if c < 0x80 {
			if c >= 0x20 {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if narrow(r) {
			n++
			i += size
			continue
		}
		return ansi.StringWidth(s)
	}
	return n
}

// paint is a style reduced to the escape codes around its text: two
// concatenations per cell, not a Render that measures and re-parses it.
type paint struct{ pre, post string }

func newPaint(render func(...string) string) paint {
	const mark = "\x00"
	out := render(mark)
	i := strings.Index(out, mark)
	if i < 0 {
		return paint{}
	}
	return paint{pre: out[:i], post: out[i+len(mark):]}
}

func (p paint) wrap(s string) string {
	if p.pre == "" && p.post == "" {
		return s
	}
	return p.pre + s + p.post
}

// narrow reports runes that surely take one cell (Latin, punctuation, arrows,
// operators, box drawing, blocks, shapes but two emoji squares, braille).
func narrow(r rune) bool {
	switch {
	case r >= 0xa0 && r < 0x300:
		return true
	case r >= 0x2010 && r <= 0x2027, r >= 0x2030 && r <= 0x205e:
		return true
	case r >= 0x2070 && r <= 0x22ff:
		return true
	case r >= 0x2500 && r <= 0x25ff:
		return r != 0x25fd && r != 0x25fe
	case r >= 0x2800 && r <= 0x28ff:
		return true
	}
	return false
}

// wordwrap is ansi.Wordwrap without its overhang: a line broken after a hyphen
// may run a cell past w, so it is wrapped narrower; a longer word is broken.
func wordwrap(s string, w int) string {
	w = max(w, 1)
	for limit := w; limit >= max(w-2, 1); limit-- {
		out := ansi.Wordwrap(s, limit, "")
		fits := true
		for _, l := range strings.Split(out, "\n") {
			if cellWidth(l) > w {
				fits = false
				break
			}
		}
		if fits {
			return out
		}
	}
	return ansi.Hardwrap(s, w, true)
}
