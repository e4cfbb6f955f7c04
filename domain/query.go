package domain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxWindow is the longest history window: the clouds keep 90 days of spot prices.
const MaxWindow = 90 * 24 * time.Hour

// WindowForm is the accepted form of a window, for error messages.
const WindowForm = "a whole number and a unit m, h, d or w (30m, 6h, 24h, 7d, 2w, 90d), at most 90d"

// ParseWindow parses a window such as "30m", "6h", "7d" or "2w", at most 90 days.
func ParseWindow(s string) (time.Duration, error) {
	d, err := ParseSpan(s, "mhdw", MaxWindow)
	switch {
	case errors.Is(err, ErrSpanTooLong):
		return 0, fmt.Errorf("window %q is longer than 90 days: the clouds keep 90 days of history", s)
	case err != nil:
		return 0, fmt.Errorf("window %q: want %s", s, WindowForm)
	}
	return d, nil
}

// The errors of ParseSpan; callers say what they accept.
var (
	ErrSpanForm    = errors.New("not a whole number and a unit")
	ErrSpanTooLong = errors.New("too long")
)

// ParseSpan parses a positive whole number and one unit of units (of "mhdw"), at most max.
func ParseSpan(s, units string, max time.Duration) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || !strings.ContainsRune(units, rune(t[len(t)-1])) {
		return 0, ErrSpanForm
	}
	per := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[t[len(t)-1]]
	digits := t[:len(t)-1]
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, ErrSpanForm
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || n == 0 && err == nil {
		return 0, ErrSpanForm
	}
	if err != nil || n > int64(max/per) {
		return 0, ErrSpanTooLong
	}
	return time.Duration(n) * per, nil
}

// FormatWindow prints a window as ParseWindow reads it, in the largest whole unit.
func FormatWindow(d time.Duration) string {
	switch {
	case d <= 0:
		return "0m"
	case d%(7*24*time.Hour) == 0 && d >= 14*24*time.Hour:
		return strconv.FormatInt(int64(d/(7*24*time.Hour)), 10) + "w"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	default:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
}

// FormatDuration prints a duration as Go does without zero units: 15m, not 15m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Query selects pools by provider, GPU model and region; an empty list matches all.
type Query struct {
	Providers []string
	GPUs      []string // canonical models, "H100"; matched case-insensitively
	Regions   []string
	Window    time.Duration
}

// Matches reports whether the pool passes the query's filters.
func (q Query) Matches(p Pool) bool {
	return matchAny(q.Providers, p.Provider) && matchAny(q.GPUs, p.GPU.Model) && matchAny(q.Regions, p.Region)
}

// WantsRegion reports whether the query includes the region.
func (q Query) WantsRegion(region string) bool { return matchAny(q.Regions, region) }

// WantsGPU reports whether the query includes the GPU model.
func (q Query) WantsGPU(model string) bool { return matchAny(q.GPUs, model) }

func matchAny(list []string, v string) bool {
	return len(list) == 0 || slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, v) })
}

// SplitList splits a comma list such as "H100, A100" into trimmed, non-empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RegionErrors are the errors, by region, of a search that other regions answered.
type RegionErrors map[string]error

func (e RegionErrors) Error() string {
	var parts []string
	for _, r := range e.Regions() {
		parts = append(parts, fmt.Sprintf("%s: %v", r, e[r]))
	}
	return strings.Join(parts, "; ")
}

// RegionErrors returns the errors by region.
func (e RegionErrors) RegionErrors() map[string]error { return e }

// Regions lists the failed regions, sorted.
func (e RegionErrors) Regions() []string { return slices.Sorted(maps.Keys(e)) }

// Join is every region's error, in order of region.
func (e RegionErrors) Join() error {
	errs := make([]error, 0, len(e))
	for _, r := range e.Regions() {
		errs = append(errs, e[r])
	}
	return errors.Join(errs...)
}

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

// RetryAfter reads an HTTP Retry-After header, seconds or a date (RFC 9110
// 10.2.3), as a wait from now of at most most; false when absent or unreadable.
func RetryAfter(h string, now time.Time, most time.Duration) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return min(time.Duration(n)*time.Second, most), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), most), true
	}
	return 0, false
}

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
