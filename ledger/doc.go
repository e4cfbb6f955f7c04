// Package ledger is where every action that spends money goes through:
// the SQLite ledger (written before each call), the booking service with
// its budget caps and reconciliation, scheduled fleets, jobs, the
// offering cache, and usage (what was bought and what was used).
package ledger
