//go:build race

package sim

// raceEnabled lets the slowest tests do less under the race detector,
// which makes them ten times slower and has nothing to find there.
const raceEnabled = true
