// Package present derives the figures of each pool and declares, once,
// the columns that show them to the TUI and to every CLI output format.
package present
