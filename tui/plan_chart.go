package tui

import (
	"math"
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// planChartMin is four rows of points and the axis.
const planChartMin = 5

// rowLabel marks the i-th strategy: 1-9, then a-z.
func rowLabel(i int) string {
	switch {
	case i < 9:
		return string(rune('1' + i))
	case i < 9+26:
		return string(rune('a' + i - 9))
	}
	return "+"
}

// maxNines: late in at most one run in 10,000 counts as always on time.
const maxNines = 4

// nines places an on-time share by its nines (90 % at 1, 99 % at 2): linear,
// 99 % and 100 % would share a cell, yet that is what a deadline is about.
func nines(onTimePct float64) float64 {
	late := 1 - onTimePct/100
	if late <= math.Pow(10, -maxNines) {
		return maxNines
	}
	return math.Min(math.Max(-math.Log10(late), 0), maxNines)
}

// planChart scatters the strategies by expected cost against on-time nines,
// labelled, the better-ranked and the selected on top; "" when too small.
func planChart(rs []planner.Result, sel int, onTime float64, w, h int, st *styles) string {
	if len(rs) == 0 || h < planChartMin {
		return ""
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	xmin := nines(onTime)
	for _, r := range rs {
		ymin, ymax = math.Min(ymin, r.ExpectedCostUSD), math.Max(ymax, r.ExpectedCostUSD)
		xmin = math.Min(xmin, nines(r.OnTimePct))
	}
	if math.IsNaN(ymin) || math.IsInf(ymin, 0) || math.IsNaN(ymax) || math.IsInf(ymax, 0) {
		return ""
	}
	if ymax-ymin < 0.01 {
		ymin, ymax = ymin*0.95, ymax*1.05+0.01
	}
	lo := math.Min(math.Floor(xmin), maxNines-1)
	top, bottom := "$"+present.Money(ymax), "$"+present.Money(ymin)
	lw := max(cellWidth(top), cellWidth(bottom))
	pw, ph := w-lw-1, h-1
	if pw < 16 {
		return ""
	}
	col := func(pct float64) int {
		return min(max(int(math.Round((nines(pct)-lo)/(maxNines-lo)*float64(pw-1))), 0), pw-1)
	}
	row := func(y float64) int {
		return min(max(int(math.Round((ymax-y)/(ymax-ymin)*float64(ph-1))), 0), ph-1)
	}
	grid := make([][]string, ph)
	for i := range grid {
		grid[i] = slices.Repeat([]string{" "}, pw)
	}
	tc := -1
	if nines(onTime) > lo && onTime < 100 {
		tc = col(onTime)
		for i := range grid {
			grid[i][tc] = st.dim.Render("┊")
		}
	}
	// Worst-ranked first, so the better end on top; the selected last.
	for i := len(rs) - 1; i >= 0; i-- {
		if i != sel {
			grid[row(rs[i].ExpectedCostUSD)][col(rs[i].OnTimePct)] = rowLabel(i)
		}
	}
	if sel >= 0 && sel < len(rs) {
		grid[row(rs[sel].ExpectedCostUSD)][col(rs[sel].OnTimePct)] = st.cursor.Render(rowLabel(sel))
	}
	var b strings.Builder
	for i, cells := range grid {
		label, axis := "", "│"
		switch i {
		case 0:
			label, axis = top, "┤"
		case ph - 1:
			label, axis = bottom, "┤"
		}
		b.WriteString(fit(label, lw, true) + st.dim.Render(axis) + strings.Join(cells, "") + "\n")
	}
	b.WriteString(strings.Repeat(" ", lw) + st.dim.Render("└"+xAxis(pw, lo, onTime, tc, col)))
	return b.String()
}

// xAxis is the bottom line: the nines' labels that fit and the threshold.
func xAxis(pw int, lo, onTime float64, tc int, col func(float64) int) string {
	line := []rune(strings.Repeat("─", pw))
	free := slices.Repeat([]bool{true}, pw)
	// put writes s at at only if it and gap cells around are free.
	put := func(at int, s string, gap int) bool {
		r := []rune(s)
		if at < 0 || at+len(r) > pw {
			return false
		}
		for i := max(at-gap, 0); i < min(at+len(r)+gap, pw); i++ {
			if !free[i] {
				return false
			}
		}
		for i, c := range r {
			line[at+i], free[at+i] = c, false
		}
		return true
	}
	put(pw-4, "100%", 0)
	if tc >= 0 {
		th := present.GPUCount(onTime) + "┊"
		put(tc-len([]rune(th))+1, th, 0)
	}
	for _, pct := range []float64{0, 90, 99, 99.9} {
		if n := nines(pct); n >= lo {
			label := decimal(pct) + "%"
			at := col(pct)
			if at > 0 {
				at -= len(label) / 2
			}
			put(at, label, 1)
		}
	}
	for _, caption := range []string{" expected $ ↑ against on time % → ", " $ ↑ on time → ", " on time → "} {
		// Between the ticks, where the longest run of axis is.
		best, run, at := 0, 0, 0
		for i := range pw {
			if free[i] {
				run++
				if run > best {
					best, at = run, i-run+1
				}
			} else {
				run = 0
			}
		}
		if n := len([]rune(caption)); n+2 <= best && put(at+(best-n)/2, caption, 1) {
			break
		}
	}
	return string(line)
}
