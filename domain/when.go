package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// WhenForm is what ParseWhen accepts, for messages.
const WhenForm = "a local time (YYYY-MM-DD HH:MM or YYYY-MM-DDTHH:MM), today or tomorrow and a local time (tomorrow 09:00), a weekday and a local time (Thu 14:00: the next one), a date (YYYY-MM-DD, midnight UTC), an offset from now (+30m, +6h, +2d, +1w) or an RFC 3339 time (YYYY-MM-DDTHH:MM:SSZ)"

// WhenExample is a time ParseWhen reads, two days from now.
func WhenExample(now time.Time) string { return now.AddDate(0, 0, 2).Format("2006-01-02") + " 09:00" }

// ParseWhen reads a time as people write it (WhenForm) in the CLI, TUI and
// rules: wall-clock times in now's location, a bare date at midnight UTC.
func ParseWhen(s string, now time.Time) (time.Time, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "+") {
		d, err := ParseSpan(t[1:], "mhdw", MaxWindow)
		switch {
		case errors.Is(err, ErrSpanTooLong):
			return time.Time{}, fmt.Errorf("%q is more than 90 days ahead", s)
		case err != nil:
			return time.Time{}, whenErr(s, now)
		}
		return now.Add(d), nil
	}
	if v, err := time.Parse(time.RFC3339, t); err == nil {
		return v, nil
	}
	if v, ok := dayAndClock(t, now); ok {
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
	return time.Time{}, whenErr(s, now)
}

func whenErr(s string, now time.Time) error {
	return fmt.Errorf("%q: want %s, such as %s", s, WhenForm, WhenExample(now))
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "sunday": time.Sunday, "mon": time.Monday, "monday": time.Monday,
	"tue": time.Tuesday, "tues": time.Tuesday, "tuesday": time.Tuesday, "wed": time.Wednesday, "wednesday": time.Wednesday,
	"thu": time.Thursday, "thur": time.Thursday, "thurs": time.Thursday, "thursday": time.Thursday,
	"fri": time.Friday, "friday": time.Friday, "sat": time.Saturday, "saturday": time.Saturday,
}

// dayAndClock reads "today 14:00", "tomorrow 09:00" and "Thu 14:00" (strictly after now).
func dayAndClock(s string, now time.Time) (time.Time, bool) {
	day, clock, ok := strings.Cut(s, " ")
	if !ok {
		return time.Time{}, false
	}
	hm, err := time.Parse("15:04", strings.TrimSpace(clock))
	if err != nil {
		return time.Time{}, false
	}
	loc := now.Location()
	y, m, d := now.Date()
	at := func(days int) time.Time { return time.Date(y, m, d+days, hm.Hour(), hm.Minute(), 0, 0, loc) }
	switch day = strings.ToLower(day); day {
	case "today":
		return at(0), true
	case "tomorrow":
		return at(1), true
	}
	wd, ok := weekdays[day]
	if !ok {
		return time.Time{}, false
	}
	ahead := (int(wd) - int(now.Weekday()) + 7) % 7
	if v := at(ahead); v.After(now) {
		return v, true
	}
	return at(ahead + 7), true
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Earlier returns the earlier of a and b.
func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
