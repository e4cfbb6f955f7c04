package planner

import (
	"bytes"
	"context"
)

// ParseTrace reads a trace held in memory (see ReadTrace).
func ParseTrace(name string, b []byte) (Trace, error) {
	return ReadTrace(name, bytes.NewReader(b))
}

// Backtest is BacktestContext without a deadline.
func Backtest(traces []Trace, cfg BacktestConfig) ([]BacktestRow, error) {
	return BacktestContext(context.Background(), traces, cfg)
}
