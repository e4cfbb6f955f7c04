package providers

import (
	"testing"
	"time"
)

func TestParseStart(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, est)
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"+6h", now.Add(6 * time.Hour)},
		{"+2d", now.Add(48 * time.Hour)},
		{"+30m", now.Add(30 * time.Minute)},
		{"2026-12-02 09:00", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}, // local: EST
		{"2026-12-02T09:00", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)},
		{"2026-12-02", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}, // a date is midnight UTC
		{"2026-12-02T09:00:00Z", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},
		{"2026-12-02T09:00:00+01:00", time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)},
	} {
		got, err := ParseStart(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "+", "+2x", "+0d", "+100d", "2026-13-01", "12/02/2026", "2026-12-02 25:00"} {
		if _, err := ParseStart(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseStart: any text is read or refused, never a panic.
func FuzzParseStart(f *testing.F) {
	for _, s := range []string{"+2d", "2026-12-02 09:00", "2026-12-02", "2026-12-02T09:00:00Z", "+99999999999999999999h"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseStart(s, now); err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
