// Package watch evaluates the alert rules, one Evaluator per process:
// on the market's snapshots, on a timer (block searches, plans) and on
// the ledger; each kind of rule is one file (kind_*.go). What fired and
// what is owed is kept in its own SQLite file, so a restart repeats
// nothing and loses nothing, and processes sharing it raise each alert
// once. docs/DESIGN.md has the whole of it.
package watch
