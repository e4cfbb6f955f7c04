// Package watch watches the market for its user: rules (config `watch:`
// and the rules made in the TUI) are evaluated by one Evaluator per
// process, on the hub's snapshots (spot prices, interruption buckets), on
// a timer (capacity-block searches, plans: each asks every region of every
// cloud) and on the ledger (a booked block that starts soon). A rule that
// fires raises an Alert: at most one per rule per cooldown, and a
// condition rule (a price below a figure, a block on sale) fires once per
// crossing. Alerts go to every TUI session that subscribes (the header
// badge, the Alerts view, the bell) and outward through notifiers (a
// command, a webhook) with timeouts and retries.
//
// What has fired and what is still to deliver is kept in its own SQLite
// file in the data dir (State), not in the ledger: a restart neither
// repeats an alert nor loses one not yet delivered, and two processes
// watching the same rules (`serve` and `watch`) raise each alert once.
//
// The package has no UI: the TUI and the `watch` command sit above it.
package watch
