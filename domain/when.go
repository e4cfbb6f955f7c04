package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// WhenForm is what ParseWhen accepts, for messages.
const WhenForm = "a local time (2026-11-30 09:00 or 2026-11-30T09:00), a weekday and a local time (Thu 14:00: the next one), a date (2026-11-30, midnight UTC), an offset from now (+30m, +6h, +2d, +1w) or an RFC 3339 time (2026-11-30T09:00:00Z)"

// ParseWhen reads a start time as people write it, the same in the CLI
// (--start-after, --start-before) and the TUI's Blocks form:
//
//   - "+2d": an offset from now, a whole number and a unit m, h, d or w,
//     at most 90 days (blocks start within 8 weeks);
//   - "2026-11-30 09:00" or "2026-11-30T09:00": a wall-clock time in now's
//     location (the local time of the terminal, or of the SSH session:
//     the tables show start times in it too);
//   - "Thu 14:00" (or "thursday 14:00"): the next such wall-clock time in
//     now's location after now — today if it is still to come, else
//     within the week ahead (a workshop is booked as people say it);
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
	if v, ok := nextWeekday(t, now); ok {
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

// weekdays are the names a weekday may be written by, lower case.
var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "sunday": time.Sunday, "mon": time.Monday, "monday": time.Monday,
	"tue": time.Tuesday, "tues": time.Tuesday, "tuesday": time.Tuesday, "wed": time.Wednesday, "wednesday": time.Wednesday,
	"thu": time.Thursday, "thur": time.Thursday, "thurs": time.Thursday, "thursday": time.Thursday,
	"fri": time.Friday, "friday": time.Friday, "sat": time.Saturday, "saturday": time.Saturday,
}

// nextWeekday reads "Thu 14:00": the first such wall-clock time in now's
// location strictly after now.
func nextWeekday(s string, now time.Time) (time.Time, bool) {
	day, clock, ok := strings.Cut(s, " ")
	if !ok {
		return time.Time{}, false
	}
	wd, ok := weekdays[strings.ToLower(day)]
	if !ok {
		return time.Time{}, false
	}
	hm, err := time.Parse("15:04", strings.TrimSpace(clock))
	if err != nil {
		return time.Time{}, false
	}
	loc := now.Location()
	y, m, d := now.Date()
	ahead := (int(wd) - int(now.Weekday()) + 7) % 7
	v := time.Date(y, m, d+ahead, hm.Hour(), hm.Minute(), 0, 0, loc)
	if !v.After(now) {
		v = time.Date(y, m, d+ahead+7, hm.Hour(), hm.Minute(), 0, 0, loc)
	}
	return v, true
}
