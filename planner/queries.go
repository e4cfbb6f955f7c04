package planner

import (
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// BlockQueries are the offering searches whose answers may hold the job,
// for the caller to run (the booking service keeps what they find, so a
// plan's offering can be booked by id). For each acceptable model:
//   - blocks long enough for the whole job: whole days (AWS sells 1-14
//     days, then weeks) covering the work, a changeover and the 30
//     minutes before the end when AWS stops the instances, and one day
//     more, since blocks start at 11:30 UTC and the job may not start
//     there;
//   - a one-day block, for a block that does part of the job with spot
//     for the rest;
//   - a reservation of the job's whole hours from its start (Azure's
//     reservations start when bought and take any whole hours).
//
// Starts range from a day before the job's start (a block that began
// earlier still holds it) to its deadline, and never before now.
func BlockQueries(job Job, now time.Time, speeds Speeds) []domain.OfferingQuery {
	if speeds == nil {
		speeds = DefaultSpeeds
	}
	after := job.Start.Add(-24 * time.Hour)
	if after.Before(now) {
		after = now
	}
	before := job.Deadline
	if !before.After(after) {
		return nil
	}
	var out []domain.OfferingQuery
	seen := map[[2]any]bool{}
	add := func(model string, d time.Duration, from time.Time) {
		k := [2]any{model, d}
		if seen[k] || d <= 0 || d > MaxSpan {
			return
		}
		seen[k] = true
		out = append(out, domain.OfferingQuery{GPU: model, GPUs: job.GPUs, Duration: d, StartAfter: from, StartBefore: before})
	}
	for _, model := range job.Models {
		s := speeds.Relative(model, job.Models[0])
		if s <= 0 {
			continue
		}
		work := time.Duration((job.Hours/s)*float64(time.Hour)) + job.Changeover
		days := int(math.Ceil((work+30*time.Minute).Hours()/24 - 1e-9))
		for _, n := range []int{days, days + 1} {
			add(model, time.Duration(awsDays(n))*24*time.Hour, after)
		}
		if days > 1 {
			add(model, 24*time.Hour, after)
		}
		// A reservation (Azure's) starts when it is made: bought now, it
		// is held, and billed, from now to the job's end.
		hold := work
		if wait := job.Start.Sub(now); wait > 0 {
			hold += wait
		}
		hours := math.Ceil(hold.Hours() - 1e-9)
		add(model, time.Duration(hours)*time.Hour, now)
	}
	return out
}

// awsDays rounds a number of days up to a length AWS sells: 1-14 days,
// then whole weeks.
func awsDays(n int) int {
	if n <= 14 {
		return max(n, 1)
	}
	return max(21, (n+6)/7*7)
}
