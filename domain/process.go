package domain

// SpotProcess describes a pool's spot capacity as a process in time: runs
// of available capacity that end in an interruption, then gaps until it
// comes back. It is what a source knows as a fact rather than as a bucket
// (the simulated market knows its own process); the planner prefers it to
// a bucket or an eviction rate, which only rank pools against each other.
type SpotProcess struct {
	// InterruptionsPerHour is how often held capacity (one instance) is
	// reclaimed, per hour it is held.
	InterruptionsPerHour float64
	// GapMedianHours is the median time, in hours, until reclaimed
	// capacity comes back.
	GapMedianHours float64
	// Availability is the long-run share of time (0, 1] the pool has
	// capacity.
	Availability float64
	// RegionShare (0..1) is the part of the process common to the other
	// zones of the region (for the same instance type): its share of the
	// interruptions, and of the unavailability in log terms. Zero means
	// the zones are independent.
	RegionShare float64
}
