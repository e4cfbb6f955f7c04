package domain

import (
	"errors"
	"fmt"
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
	if len(list) == 0 {
		return true
	}
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
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
