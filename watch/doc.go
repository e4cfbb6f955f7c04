// Package watch evaluates the alert rules, one Evaluator per process, on
// snapshots, timers and the ledger; each rule kind is one file (kind_*.go).
// Its SQLite file makes a restart repeat and lose nothing (docs/DESIGN.md).
package watch
