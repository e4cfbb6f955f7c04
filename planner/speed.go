package planner

// Speeds are GPU models' training speeds relative to an H100 (1.0), so a
// job measured on one model can be priced on another: an hour of work on
// an H100 takes 1/0.45 hours on an A100 (config plan.speed overrides them).
type Speeds map[string]float64

// DefaultSpeeds are relative training throughputs from public benchmarks,
// rounded and on the conservative side:
//   - H200 1.2: the same Hopper compute as the H100 with 1.4× the memory
//     bandwidth; NVIDIA's and MLPerf Training's LLM results put it 1.1-1.4×
//     an H100.
//   - A100 0.45: MLPerf Training v3.0/v3.1 (GPT-3, BERT) and NVIDIA's
//     H100 material show an H100 2-3× an A100 per GPU in BF16/FP8.
//   - L40S 0.4, L4 0.12, A10G and A10 0.15: NVIDIA's data-centre sheets
//     (dense BF16 TFLOPS and memory bandwidth against the H100 SXM's).
//   - V100 0.18: MLPerf shows an A100 about 2.5× a V100.
//   - T4 0.06: a quarter of a V100's dense FP16 training throughput.
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

// Relative is how much work per hour a GPU of model does, in hours of
// work on ref (1 for the same model). Zero when either is unknown.
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
