package tui

import (
	"strings"

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

// pointed is a list's line: the cursor's marked › and in the cursor style.
func (st *styles) pointed(text string, cur bool) string {
	if cur {
		return "› " + st.cursor.Render(text)
	}
	return "  " + text
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
