// Package ledger is where every money action goes: ledger, booking, schedules, jobs, usage.
package ledger
