// Package feed runs one poll loop per market data source, fans immutable
// snapshots out to subscribers, owns coverage and retry gaps, and keeps the
// price history cache (history.db).
package feed
