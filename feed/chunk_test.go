package feed

import (
	"math"
	"slices"
	"testing"

	"github.com/gpumarket/gpumarket/series"
)

func TestChunkRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		at  []int64
		usd []float64
	}{
		{nil, nil},
		{[]int64{1_700_000_000}, []float64{98.123456}},
		{[]int64{-5, 0, 1, 86_399, 86_400}, []float64{0, 1e-9, 3.5, 1e6, 0.0001}},
	} {
		b := encodeChunk(tc.at, tc.usd)
		at, usd, err := appendChunk(nil, nil, b)
		if err != nil || !slices.Equal(at, tc.at) || !slices.Equal(usd, tc.usd) {
			t.Errorf("%v %v → %v %v, %v", tc.at, tc.usd, at, usd, err)
		}
	}
	if dayOf(-1) != -1 || dayOf(0) != 0 || dayOf(86_399) != 0 || dayOf(86_400) != 1 {
		t.Error("dayOf")
	}
}

func TestChunkRefusesWhatEncodeWouldNotWrite(t *testing.T) {
	good := encodeChunk([]int64{10, 20}, []float64{1, 2})
	for name, b := range map[string][]byte{
		"empty":         nil,
		"other version": append([]byte{2}, good[1:]...),
		"short":         good[:len(good)-1],
		"left over":     append(append([]byte(nil), good...), 0),
		"count too big": {1, 50, 0},
		"not ascending": encodeChunk([]int64{10, 10}, []float64{1, 2}),
		"NaN":           encodeChunk([]int64{10}, []float64{math.NaN()}),
		"negative":      encodeChunk([]int64{10}, []float64{-1}),
	} {
		if _, _, err := appendChunk(nil, nil, b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestMergePoints(t *testing.T) {
	at, usd := mergePoints([]int64{1, 3, 5}, []float64{1, 3, 5}, []int64{2, 3, 6}, []float64{20, 30, 60})
	if !slices.Equal(at, []int64{1, 2, 3, 5, 6}) || !slices.Equal(usd, []float64{1, 20, 30, 5, 60}) {
		t.Errorf("merge: %v %v", at, usd)
	}
}

// FuzzAppendChunk: a damaged file's bytes never crash the decoder, and
// what it accepts are points encodeChunk writes back as they are.
func FuzzAppendChunk(f *testing.F) {
	f.Add(encodeChunk([]int64{1_700_000_000, 1_700_003_600}, []float64{3.5, 3.75}))
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 255, 255, 255, 255, 255, 255, 255, 255, 255, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		at, usd, err := appendChunk(nil, nil, b)
		if err != nil {
			return
		}
		if !series.Ascending(at) || len(at) != len(usd) {
			t.Fatalf("accepted unsorted points %v", at)
		}
		at2, usd2, err := appendChunk(nil, nil, encodeChunk(at, usd))
		if err != nil || !slices.Equal(at2, at) || !slices.Equal(usd2, usd) {
			t.Fatalf("accepted %x as %v %v, which do not survive encoding: %v %v, %v", b, at, usd, at2, usd2, err)
		}
	})
}
