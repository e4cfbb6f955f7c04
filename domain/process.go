package domain

// SpotProcess is a pool's spot capacity as runs ended by interruptions, then gaps.
type SpotProcess struct {
	InterruptionsPerHour float64 // per hour one instance is held
	GapMedianHours       float64 // until reclaimed capacity comes back
	Availability         float64 // long-run share of time with capacity, (0, 1]
	RegionShare          float64 // share common to the region's other zones; 0: independent
}
