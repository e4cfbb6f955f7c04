// Package planner answers "G GPUs for W hours, done by D: how, at what
// cost and risk" by Monte Carlo over each pool's spot risk, and replays
// the same policies on traces (Backtest). Its figures' sources are in
// docs/DESIGN.md (The planner).
package planner
