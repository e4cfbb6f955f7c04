// Package present derives the figures of each pool and declares, once,
// the columns that show them to the TUI and to every CLI output format.
package present

import (
	"time"
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
