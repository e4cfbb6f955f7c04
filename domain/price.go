package domain

import "math"

// PerGPUHour converts an instance-hour price to a GPU-hour price; NaN with no GPUs.
func PerGPUHour(usdHour, gpus float64) float64 {
	if gpus <= 0 {
		return math.NaN()
	}
	return usdHour / gpus
}

// SavingsPct is how much cheaper spot is than on-demand, in percent; NaN with no on-demand.
func SavingsPct(spot, onDemand float64) float64 {
	if onDemand <= 0 {
		return math.NaN()
	}
	return (1 - spot/onDemand) * 100
}
