package planner

// Speeds are training speeds relative to an H100 (config plan.speed).
type Speeds map[string]float64

// DefaultSpeeds are from public benchmarks, conservative (DESIGN.md).
var DefaultSpeeds = Speeds{
	"H200": 1.2, "H100": 1.0, "A100": 0.45, "L40S": 0.4, "L4": 0.12,
	"A10G": 0.15, "A10": 0.15, "V100": 0.18, "T4": 0.06,
}

// of returns a model's speed, the configured one first.
func (s Speeds) of(model string) float64 {
	if v, ok := s[model]; ok && v > 0 {
		return v
	}
	if v, ok := DefaultSpeeds[model]; ok {
		return v
	}
	return 0
}

// Relative is work per hour of model in hours of ref; 0 when unknown.
func (s Speeds) Relative(model, ref string) float64 {
	if model == ref {
		return 1
	}
	m, r := s.of(model), s.of(ref)
	if m <= 0 || r <= 0 {
		return 0
	}
	return m / r
}
