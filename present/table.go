// Package present derives the figures of each pool and declares, once,
// the columns that show them to the TUI and to every CLI output format.
package present

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Col is one column of a table, declared once for the TUI and every CLI
// output format.
type Col[R any] struct {
	// The TUI's: MaxWidth is how far it grows, Prio 0 stays longest.
	Title                 string
	Width, MaxWidth, Prio int
	Right                 bool
	Cell                  func(R) string

	// The CLI's: Field is the JSON key (DESIGN.md's contract); Format is
	// the table's ("%.2f", "local", "-": not in it); a nil or NaN Value is
	// unknown. Head and Text replace the table's upper-cased Field and
	// formatted Value.
	Field, Format string
	TableOnly     bool
	Value         func(R) any
	Head          string
	Text          func(R) string
}

// AlertLine is an alert in the Alerts view; At is in the viewer's zone.
type AlertLine struct {
	At         time.Time
	Rule, Text string
}

// RuleLine is a rule in the Alerts view: Made in a session (else from the
// config), Note why it does not evaluate, LastFired in the viewer's zone.
type RuleLine struct {
	Name, Condition, Note string
	Made, Active          bool
	LastFired             time.Time
}

// Alerts and Rules are the Alerts view's lists; the CLI prints alerts as
// lines and has no rule table.
var (
	Alerts = []*Col[*AlertLine]{
		{Title: "WHEN", Width: 10, Cell: func(a *AlertLine) string { return a.At.Format("Mon 15:04") }},
		{Title: "RULE", Width: 18, Prio: 2, Cell: func(a *AlertLine) string { return a.Rule }},
		{Title: "ALERT", Width: 6, MaxWidth: 1 << 10, Prio: 1, Cell: func(a *AlertLine) string { return a.Text }},
	}
	Rules = []*Col[*RuleLine]{
		{Title: "RULE", Width: 18, Cell: func(r *RuleLine) string { return r.Name }},
		{Title: "FROM", Width: 8, Prio: 2, Cell: func(r *RuleLine) string {
			if r.Made {
				return "made"
			}
			return "config"
		}},
		{Title: "CONDITION · STATE", Width: 6, MaxWidth: 1 << 10, Prio: 1, Cell: ruleState},
	}
)

func ruleState(r *RuleLine) string {
	state := "waiting"
	switch {
	case r.Note != "":
		state = r.Note
	case r.Active:
		state = "holds now"
	}
	if !r.LastFired.IsZero() {
		state += " · last told " + r.LastFired.Format("Mon 15:04")
	}
	return r.Condition + " · " + state
}

// Money prints dollars with the decimals their size needs: 98.3, 1.006.
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

// Dollars is a total in dollars with cents: "$1,234.56".
func Dollars(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	whole, cents, _ := strings.Cut(strconv.FormatFloat(math.Abs(v), 'f', 2, 64), ".")
	if math.Signbit(v) {
		return "-$" + Thousands(whole) + "." + cents
	}
	return "$" + Thousands(whole) + "." + cents
}

// Thousands groups a whole number's digits by three: "10,000".
func Thousands[T int | string](n T) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// GPUCount prints a GPU count: 8, or 0.17 for a partial-GPU size.
func GPUCount(n float64) string {
	if n == math.Trunc(n) {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	return strconv.FormatFloat(n, 'f', 2, 64)
}

func Place(region, zone string) string { return domain.Place(region, zone) }

// DisplayType drops Azure's "Standard_" prefix, as people say the type.
func DisplayType(t string) string {
	return strings.TrimPrefix(t, "Standard_")
}

// CloudName is "sim:aws" for a source that is not the cloud itself, so a
// simulated pool is never taken for a real one.
func CloudName(p domain.Pool) string {
	if p.Provider == "" || p.Provider == string(p.Cloud) {
		return string(p.Cloud)
	}
	return p.Provider + ":" + string(p.Cloud)
}

var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values (NaN: none) as blocks between their min and max.
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

// Round rounds a derived figure for print; NaN and ±Inf are nil.
func Round(v float64, digits int) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	p := math.Pow(10, float64(digits))
	return domain.Float(math.Round(v*p) / p)
}

// Known is v, or nil (null in JSON) when it is unknown (NaN or ±Inf).
func Known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return domain.Float(v)
}

// positive is nil for 0: a source that did not say.
func positive(v float64) *float64 {
	if !(v > 0) {
		return nil
	}
	return domain.Float(v)
}

// OptString is s, or nil (null in JSON) when it is empty.
func OptString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
