package providers

import (
	"strings"
	"time"
)

// StartForm is what ParseStart accepts, for error messages.
const StartForm = "2026-11-30 09:00 (your local time), 2026-11-30 (midnight UTC), +6h, +2d or an RFC 3339 time"

// ParseStart reads a point in time as a person writes it: "+2d" (from
// now), "2026-11-30 09:00" (local time: now's Location), "2026-12-01"
// (midnight UTC, as the offerings command reads it) or RFC 3339. The
// Blocks form, the Plan view and `gpumarket plan` all read times with it.
func ParseStart(s string, now time.Time) (time.Time, error) {
	if strings.HasPrefix(s, "+") {
		d, err := ParseSpan(s[1:], "mhdw", MaxWindow)
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Parse("2006-01-02", s)
}
