package providers

import (
	"strings"
	"testing"
	"time"
)

// The CLI and the TUI read start times alike (issue 11.14): a local
// wall-clock time the TUI took was refused by the CLI.
func TestParseWhenReadsWhatTheTUIAndCLITake(t *testing.T) {
	east := time.FixedZone("EST", -5*3600)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC).In(east)
	cases := []struct {
		in   string
		want time.Time
	}{
		{"2026-12-02T09:00", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)},
		{"2026-12-02 09:00", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)},
		{" 2026-12-02 09:00 ", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)},
		{"2026-12-02", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{"2026-12-02T09:00:00Z", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},
		{"2026-12-02T09:00:00+01:00", time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)},
		{"+30m", now.Add(30 * time.Minute)},
		{"+6h", now.Add(6 * time.Hour)},
		{"+2d", now.Add(48 * time.Hour)},
		{"+1w", now.Add(7 * 24 * time.Hour)},
		{"+90d", now.Add(90 * 24 * time.Hour)},
		// Issue 13: "--start 'Thu 14:00'". Now is Friday 07:00 EST.
		{"Thu 14:00", time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)},
		{"thursday 14:00", time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)},
		{"Fri 08:00", time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC)},
		{"Fri 06:00", time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)},
		{"FRI 07:00", time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}, // now itself is not ahead
	}
	for _, c := range cases {
		got, err := ParseWhen(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "+", "+2", "+0d", "+2y", "+-1d", "2026-13-01", "2026-12-02 25:00", "09:00", "+91d", "Thu", "Thu 25:00", "Thx 14:00", "Thu 2pm", "14:00 Thu"} {
		if _, err := ParseWhen(bad, now); err == nil {
			t.Errorf("ParseWhen(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "90 days") && !strings.Contains(err.Error(), WhenForm) {
			t.Errorf("ParseWhen(%q): %v, want the accepted forms", bad, err)
		}
	}
}

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"2026-12-02T09:00", "2026-12-02 09:00", "2026-12-02", "+2d", "+30m", "2026-12-02T09:00:00Z", "+99999999999999999999d", " +1w ", "Thu 14:00", "sun 00:00"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseWhen(s, now)
		if err != nil {
			if !got.IsZero() {
				t.Errorf("%q: error %v with a time %v", s, err, got)
			}
			return
		}
		if strings.HasPrefix(strings.TrimSpace(s), "+") && (!got.After(now) || got.Sub(now) > MaxWindow) {
			t.Errorf("%q: offset %v outside (0, 90d]", s, got.Sub(now))
		}
		if _, ok := weekdays[strings.ToLower(strings.Fields(s + " x")[0])]; ok && (!got.After(now) || got.Sub(now) > 7*24*time.Hour+time.Hour) {
			t.Errorf("%q: a weekday form %v is not within the week ahead of %v", s, got, now)
		}
	})
}
