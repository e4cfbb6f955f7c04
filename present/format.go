package present

import (
	"math"
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/domain"
)

// Money formats a dollar amount with as many decimals as a price of its
// size needs: 98.3, 24.12, 1.006, 0.1623; "-" when unknown.
func Money(v float64) string {
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

// GPUCount prints a GPU count: 8, or 0.17 for a partial-GPU size.
func GPUCount(n float64) string {
	if n == math.Trunc(n) {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	return strconv.FormatFloat(n, 'f', 2, 64)
}

// Place names a region and zone as one (domain.Place).
func Place(region, zone string) string { return domain.Place(region, zone) }

// DisplayType shortens Azure's "Standard_NC40ads_H100_v5" to the
// "NC40ads_H100_v5" people say; filters still match the full name.
func DisplayType(t string) string {
	return strings.TrimPrefix(t, "Standard_")
}

// CloudName names the pool's cloud, and the source when it is not the
// cloud itself: a simulated pool reads "sim:aws" on every row, so it is
// never taken for a real one when sources are mixed.
func CloudName(p domain.Pool) string {
	if p.Provider == "" || p.Provider == string(p.Cloud) {
		return string(p.Cloud)
	}
	return p.Provider + ":" + string(p.Cloud)
}

var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values (NaN for "no data") as unicode blocks scaled
// between their own minimum and maximum; a flat series is a flat low line.
func Sparkline(vals []float64) string {
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

// Round rounds a derived figure for print (a quotient has no more
// meaningful digits than its inputs); NaN and ±Inf are unknown: nil. Every
// output of the CLI rounds its figures with it.
func Round(v float64, digits int) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	p := math.Pow(10, float64(digits))
	return domain.Float(math.Round(v*p) / p)
}

// known is v, or nil when it is unknown (NaN or ±Inf).
func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return domain.Float(v)
}

// positive is v when it is above zero, else nil: a GPU count, a memory
// size or an on-demand price of 0 means the source did not say.
func positive(v float64) *float64 {
	if !(v > 0) {
		return nil
	}
	return domain.Float(v)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
