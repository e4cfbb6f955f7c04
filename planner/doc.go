// Package planner answers "how do I get G GPUs for W hours, done by D, and
// what will it cost me, at what risk": it evaluates the ways to hold the
// capacity (capacity blocks, reservations, on-demand, spot in one pool or
// many, spot with an on-demand safety net, a block with spot) for a job,
// by Monte Carlo over a model of each pool's spot capacity, and replays
// the same policies on recorded availability traces (Backtest).
//
// The inputs are plain data — pools with prices and risk, offerings the
// caller found — so the CLI and the TUI feed it and tests drive it
// without a provider. It imports providers and nothing above it.
//
// The model and its figures are documented where they are defined
// (risk.go, speed.go); their sources are gathered in docs/DESIGN.md (The planner).
package planner
