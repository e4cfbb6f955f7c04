package providers

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// WhenForm is what ParseWhen accepts, for messages.
const WhenForm = "a local time (2026-11-30 09:00 or 2026-11-30T09:00), a date (2026-11-30, midnight UTC), an offset from now (+30m, +6h, +2d, +1w) or an RFC 3339 time (2026-11-30T09:00:00Z)"

// ParseWhen reads a start time as people write it, the same in the CLI
// (--start-after, --start-before) and the TUI's Blocks form:
//
//   - "+2d": an offset from now, a whole number and a unit m, h, d or w,
//     at most 90 days (blocks start within 8 weeks);
//   - "2026-11-30 09:00" or "2026-11-30T09:00": a wall-clock time in now's
//     location (the local time of the terminal, or of the SSH session:
//     the tables show start times in it too);
//   - "2026-11-30": midnight UTC of the date;
//   - an RFC 3339 time, with its own offset.
//
// Surrounding spaces are ignored.
func ParseWhen(s string, now time.Time) (time.Time, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "+") {
		d, err := ParseSpan(t[1:], "mhdw", MaxWindow)
		switch {
		case errors.Is(err, ErrSpanTooLong):
			return time.Time{}, fmt.Errorf("%q is more than 90 days ahead", s)
		case err != nil:
			return time.Time{}, fmt.Errorf("%q: want %s", s, WhenForm)
		}
		return now.Add(d), nil
	}
	if v, err := time.Parse(time.RFC3339, t); err == nil {
		return v, nil
	}
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04"} {
		if v, err := time.ParseInLocation(layout, t, now.Location()); err == nil {
			return v, nil
		}
	}
	if v, err := time.Parse("2006-01-02", t); err == nil {
		return v, nil
	}
	return time.Time{}, fmt.Errorf("%q: want %s", s, WhenForm)
}
