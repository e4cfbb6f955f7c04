//go:build !race

package planner

const raceOn = false
