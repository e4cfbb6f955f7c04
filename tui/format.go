package tui

import (
	"math"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// money formats a dollar amount with as many decimals as a price of its
// size needs: 98.3, 24.12, 1.006, 0.1623.
func money(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
}

// gpuCount prints a GPU count: 8, or 0.17 for a partial-GPU size.
func gpuCount(n float64) string {
	if n == math.Trunc(n) {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	return strconv.FormatFloat(n, 'f', 2, 64)
}

var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws values (NaN for "no data") as unicode blocks scaled
// between their own minimum and maximum; a flat series is a flat low line.
func sparkline(vals []float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	var b strings.Builder
	b.Grow(len(vals) * 3)
	for _, v := range vals {
		switch {
		case math.IsNaN(v):
			b.WriteByte(' ')
		case hi <= lo:
			b.WriteRune(sparkBlocks[0])
		default:
			i := int((v - lo) / (hi - lo) * float64(len(sparkBlocks)-1))
			b.WriteRune(sparkBlocks[min(max(i, 0), len(sparkBlocks)-1)])
		}
	}
	return b.String()
}

// fit pads or cuts s to exactly w cells. right aligns numbers.
func fit(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
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
		if ansi.StringWidth(l) > w {
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
