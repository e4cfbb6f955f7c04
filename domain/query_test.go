package domain

import (
	"strings"
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"30m": 30 * time.Minute, "6h": 6 * time.Hour, "24h": day, "7d": 7 * day,
		"2w": 14 * day, "90d": 90 * day, " 1h ": time.Hour, "12w": 84 * day, "2160h": 90 * day,
	} {
		got, err := ParseWindow(in)
		if err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "3x", "h", "0h", "-1h", "1.5h", "91d", "13w", "2161h", "1d2h", "1 h", "99999999999999999999d", "+1h"} {
		_, err := ParseWindow(bad)
		if err == nil {
			t.Errorf("ParseWindow(%q) accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "90") {
			t.Errorf("ParseWindow(%q) error %q does not say what is accepted", bad, err)
		}
	}
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"30m", "6h", "7d", "2w", "90d", "3x", "", "999999999999w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseWindow(s)
		if err != nil {
			return
		}
		if d <= 0 || d > MaxWindow {
			t.Fatalf("ParseWindow(%q) = %v, outside (0, 90d]", s, d)
		}
		// What FormatWindow prints parses back to the same window.
		if back, err := ParseWindow(FormatWindow(d)); err != nil || back != d {
			t.Fatalf("round trip of %q: %q → %v, %v", s, FormatWindow(d), back, err)
		}
	})
}

func TestFormatWindow(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 24 * time.Hour: "1d", 7 * 24 * time.Hour: "7d", 14 * 24 * time.Hour: "2w",
		90 * 24 * time.Hour: "90d", 30 * time.Minute: "30m",
	} {
		if got := FormatWindow(d); got != want {
			t.Errorf("FormatWindow(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestQueryMatches(t *testing.T) {
	p := Pool{Provider: "sim", Region: "us-east-1", GPU: GPUSpec{Model: "H100"}}
	for _, tc := range []struct {
		q    Query
		want bool
	}{
		{Query{}, true},
		{Query{GPUs: []string{"h100"}}, true},
		{Query{GPUs: []string{"A100"}}, false},
		{Query{Regions: []string{"us-east-1", "eastus"}}, true},
		{Query{Regions: []string{"eastus"}}, false},
		{Query{Providers: []string{"aws"}}, false},
	} {
		if got := tc.q.Matches(p); got != tc.want {
			t.Errorf("%+v.Matches = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := SplitList(" H100, ,A100,"); len(got) != 2 || got[0] != "H100" || got[1] != "A100" {
		t.Errorf("SplitList = %q", got)
	}
}

func TestCatalog(t *testing.T) {
	for typ, want := range map[string]GPUSpec{
		"p5.48xlarge":              {"H100", 8, 80},
		"p5e.48xlarge":             {"H200", 8, 141},
		"p4d.24xlarge":             {"A100", 8, 40},
		"P4DE.24XLARGE":            {"A100", 8, 80},
		"g6e.xlarge":               {"L40S", 1, 48},
		"g6.12xlarge":              {"L4", 4, 24},
		"g5.48xlarge":              {"A10G", 8, 24},
		"g4dn.xlarge":              {"T4", 1, 16},
		"p3.16xlarge":              {"V100", 8, 16},
		"Standard_ND96isr_H100_v5": {"H100", 8, 80},
		"Standard_NC24ads_A100_v4": {"A100", 1, 80},
		"Standard_NV6ads_A10_v5":   {"A10", 1.0 / 6, 4},
		"Standard_NC4as_T4_v3":     {"T4", 1, 16},
	} {
		e, ok := LookupGPU(typ)
		if !ok || e.GPU != want {
			t.Errorf("LookupGPU(%q) = %+v %v, want %+v", typ, e.GPU, ok, want)
		}
	}
	if _, ok := LookupGPU("m5.large"); ok {
		t.Error("m5.large is not a GPU type")
	}
	if n := len(CatalogEntries(CloudAWS)); n < 30 {
		t.Errorf("only %d AWS entries", n)
	}
	for in, want := range map[string]string{
		"NVIDIA H100 80GB HBM3": "H100", "A100-SXM4-80GB": "A100", "L40S": "L40S", "L4": "L4",
		"A10G": "A10G", "A10": "A10", "Tesla T4": "T4", "Tesla V100-SXM2-16GB": "V100", "h200": "H200",
	} {
		if got, ok := NormalizeGPUModel(in); !ok || got != want {
			t.Errorf("NormalizeGPUModel(%q) = %q, want %q", in, got, want)
		}
	}
	if _, ok := NormalizeGPUModel("Radeon Pro V520"); ok {
		t.Error("an AMD GPU was taken for an NVIDIA model")
	}
}

func TestGap(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	back := FetchRequest{Since: t0, Until: t0.Add(24 * time.Hour), Backfill: true}
	live := FetchRequest{Since: t0.Add(24 * time.Hour), Until: t0.Add(24*time.Hour + time.Minute)}
	var g Gap
	if got := g.Widen(live); !got.Since.Equal(live.Since) || !got.Until.Equal(live.Until) || got.Backfill {
		t.Fatalf("no gap widened %+v to %+v", live, got)
	}
	g = g.After(back, true) // the back-fill failed
	w := g.Widen(live)
	if !w.Since.Equal(t0) || !w.Until.Equal(live.Until) || !w.Backfill {
		t.Fatalf("widened %+v", w)
	}
	if g = g.After(w, true); !g.From.Equal(t0) || !g.Until.Equal(live.Until) {
		t.Fatalf("gap after a second failure %+v", g)
	}
	if g = g.After(w, false); g != (Gap{}) {
		t.Fatalf("gap after success %+v", g)
	}
}

// TestFormatDuration: zero units are left out, never a digit of a unit
// that is not zero (1m30s once printed as "1m3").
func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		15 * time.Minute: "15m", time.Hour: "1h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s",
		30 * time.Second: "30s", 1500 * time.Millisecond: "1.5s", 2*time.Hour + 30*time.Second: "2h0m30s", 0: "0s",
		10 * time.Second: "10s", 20 * time.Minute: "20m",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
