package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The CLI, the TUI and watch rules read times alike: a local wall-clock
// time one took was refused, or read in another zone, by another.
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
		// Now is Friday 07:00 EST.
		{"Thu 14:00", time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)},
		{"thursday 14:00", time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)},
		{"Fri 08:00", time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC)},
		{"Fri 06:00", time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)},
		{"FRI 07:00", time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}, // now itself is not ahead
		{"tomorrow 09:00", time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)},
		{"Tomorrow 00:30", time.Date(2026, 11, 21, 5, 30, 0, 0, time.UTC)},
		{"today 14:00", time.Date(2026, 11, 20, 19, 0, 0, 0, time.UTC)},
		{"today 06:00", time.Date(2026, 11, 20, 11, 0, 0, 0, time.UTC)}, // passed: the caller refuses it
	}
	for _, c := range cases {
		got, err := ParseWhen(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "+", "+2", "+0d", "+2y", "+-1d", "2026-13-01", "2026-12-02 25:00", "09:00", "+91d", "Thu", "Thu 25:00", "Thx 14:00", "Thu 2pm", "14:00 Thu", "tomorrow", "tomorrow 9am", "yesterday 09:00", "tomorrow 24:00"} {
		if _, err := ParseWhen(bad, now); err == nil {
			t.Errorf("ParseWhen(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "90 days") && (!strings.Contains(err.Error(), WhenForm) || !strings.Contains(err.Error(), "such as 2026-11-22 09:00")) {
			t.Errorf("ParseWhen(%q): %v, want the accepted forms and an example dated from today", bad, err)
		}
	}
}

// Examples in messages are dated from the day they are said, never past.
func TestWhenExampleIsAhead(t *testing.T) {
	for _, now := range []time.Time{time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), time.Date(2031, 2, 27, 1, 0, 0, 0, time.FixedZone("X", 13*3600))} {
		ex := WhenExample(now)
		v, err := ParseWhen(ex, now)
		if err != nil || !v.After(now) {
			t.Errorf("example %q on %v: %v, %v; want a time ahead", ex, now, v, err)
		}
	}
}

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"2026-12-02T09:00", "2026-12-02 09:00", "2026-12-02", "+2d", "+30m", "2026-12-02T09:00:00Z", "+99999999999999999999d", " +1w ", "Thu 14:00", "sun 00:00", "tomorrow 09:00", "TODAY 23:59"} {
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
		day := strings.ToLower(strings.Fields(s + " x")[0])
		if _, ok := weekdays[day]; ok && (!got.After(now) || got.Sub(now) > 7*24*time.Hour+time.Hour) {
			t.Errorf("%q: a weekday form %v is not within the week ahead of %v", s, got, now)
		}
		if (day == "today" || day == "tomorrow") && got.Sub(now.Truncate(24*time.Hour)) >= 48*time.Hour {
			t.Errorf("%q: %v is not today or tomorrow of %v", s, got, now)
		}
	})
}

// The fleet schedule the CLI's --start/--for and the Fleet
// form's Start/For take: a start ahead, a length within bounds, each
// refusal naming its field.
func TestParseFleetSchedule(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	from, to, err := ParseFleetSchedule("Thu 14:00", "3h", now)
	if err != nil || !from.Equal(time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)) || to.Sub(from) != 3*time.Hour {
		t.Fatalf("Thu 14:00 for 3h: %v – %v, %v", from, to, err)
	}
	if from, to, err := ParseFleetSchedule("", "90m", now); err != nil || !from.IsZero() || !to.Equal(now.Add(90*time.Minute)) {
		t.Fatalf("for 90m from now: %v – %v, %v", from, to, err)
	}
	if from, to, err := ParseFleetSchedule(" ", "", now); err != nil || !from.IsZero() || !to.IsZero() {
		t.Fatalf("no schedule: %v – %v, %v", from, to, err)
	}
	for _, c := range []struct{ start, length, field, why string }{
		{"soon", "", "start", "want a local time"},
		{"2026-11-20 11:00", "", "start", "has passed"},
		{"2026-11-20 12:00", "", "start", "has passed"},
		{"+91d", "", "start", "more than 90 days ahead"},
		{"2027-03-01", "", "start", "at most 90 days ahead"},
		{"+1h", "0", "for", "from 5m to 90d"},
		{"", "4m", "for", "from 5m to 90d"},
		{"", "3 hours", "for", "want a whole number"},
		{"", "13w", "for", "at most 90 days"},
	} {
		_, _, err := ParseFleetSchedule(c.start, c.length, now)
		var se *FleetError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Why, c.why) {
			t.Errorf("start %q for %q: %v; want the %s refused saying %q", c.start, c.length, err, c.field, c.why)
		}
	}
}

func FuzzParseFleetSchedule(f *testing.F) {
	for _, s := range [][2]string{{"Thu 14:00", "3h"}, {"+2d", "90m"}, {"", "1w"}, {"2026-12-01 09:00", "0"}, {"+1h", "99999999999999999999d"}} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, start, length string) {
		from, to, err := ParseFleetSchedule(start, length, now)
		if err != nil {
			var se *FleetError
			if !errors.As(err, &se) || (se.Field != "start" && se.Field != "for") || !from.IsZero() || !to.IsZero() {
				t.Fatalf("%q %q: error %v with %v – %v", start, length, err, from, to)
			}
			return
		}
		if !from.IsZero() && (!from.After(now) || from.Sub(now) > MaxFleetLead) {
			t.Fatalf("%q: start %v outside (now, now+90d]", start, from)
		}
		base := from
		if base.IsZero() {
			base = now
		}
		if !to.IsZero() && (to.Sub(base) < MinFleetLength || to.Sub(base) > MaxFleetLength) {
			t.Fatalf("%q: length %v outside [5m, 90d]", length, to.Sub(base))
		}
		if (FleetSpec{Start: from, End: to}).CheckSchedule(now) != nil {
			t.Fatalf("%q %q: a schedule parsed is refused by CheckSchedule", start, length)
		}
	})
}

func TestLaterAndEarlier(t *testing.T) {
	a := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	b := a.Add(time.Second)
	if Later(a, b) != b || Later(b, a) != b || Earlier(a, b) != a || Earlier(b, a) != a {
		t.Errorf("Later %v %v, Earlier %v %v", Later(a, b), Later(b, a), Earlier(a, b), Earlier(b, a))
	}
}

// TestRetryAfter reads both forms of RFC 9110's Retry-After, capped, and
// nothing else.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"2", 2 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, true},
		{"", 0, false},
		{"-3", 0, false},
		{"soon", 0, false},
		{"100000", time.Minute, true},
		{"Sun, 06 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sun, 06 Dec 2026 11:59:00 GMT", 0, true},
		{"Sun, 06 Dec 2026 13:00:00 GMT", time.Minute, true},
	} {
		got, ok := RetryAfter(tc.h, now, time.Minute)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RetryAfter(%q) = %v %v, want %v %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}
