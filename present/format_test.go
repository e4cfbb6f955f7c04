package present

import (
	"math"
	"testing"
)

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want string
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8}, "▁▂▃▄▅▆▇█"},
		{[]float64{2, 2, 2}, "▁▁▁"},
		{[]float64{math.NaN(), 1, 3}, " ▁█"},
		{nil, ""},
	} {
		if got := Sparkline(tc.in); got != tc.want {
			t.Errorf("Sparkline(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
