//go:build race

package planner

// raceOn is whether the race detector is on: tests of a million steps,
// with no goroutines to check, are left to the plain run.
const raceOn = true
