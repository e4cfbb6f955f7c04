package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// maxKeptSamples caps the busy samples kept per row (some 1 MB of report).
const maxKeptSamples = 100_000

// keptCapSays starts a capped report's note; later reads find it by it.
const keptCapSays = "the usage kept in the ledger is capped at "

const dropSays = "those before "

// maxMergeRounds bounds the merging; each round halves the oldest half.
const maxMergeRounds = 12

// capKept bounds rep to max samples, merging the oldest, then dropping; it says what it did.
func capKept(rep domain.UsageReport, max int) (domain.UsageReport, string) {
	total := countSamples(rep)
	if total <= max {
		return rep, ""
	}
	out := rep
	out.Instances = slices.Clone(rep.Instances)
	var mergedBefore time.Time
	for round := 0; total > max && round < maxMergeRounds; round++ {
		cut := oldestHalfEnd(out)
		merged := 0
		for i := range out.Instances {
			var n int
			out.Instances[i].Busy, n = mergePairs(out.Instances[i].Busy, cut)
			merged += n
		}
		if merged == 0 {
			break // nothing neighbouring left to merge
		}
		total -= merged
		if cut.After(mergedBefore) {
			mergedBefore = cut
		}
	}
	var droppedBefore time.Time
	if total > max {
		droppedBefore = dropOldest(&out, total-max)
	}
	var says []string
	if !mergedBefore.IsZero() {
		says = append(says, "samples before "+utcMinute(mergedBefore)+" merged into longer ones")
	}
	if !droppedBefore.IsZero() {
		says = append(says, dropSays+utcMinute(droppedBefore)+" dropped (that time is unmeasured)")
	}
	return out, fmt.Sprintf("%s%d samples: %s", keptCapSays, max, strings.Join(says, "; "))
}

func countSamples(rep domain.UsageReport) int {
	n := 0
	for _, in := range rep.Instances {
		n += len(in.Busy)
	}
	return n
}

// oldestHalfEnd is the start of the median sample.
func oldestHalfEnd(rep domain.UsageReport) time.Time {
	ats := sampleStarts(rep)
	return time.Unix(0, ats[len(ats)/2]).UTC()
}

// sampleStarts are the starts of rep's samples in Unix nanoseconds, in order.
func sampleStarts(rep domain.UsageReport) []int64 {
	ats := make([]int64, 0, countSamples(rep))
	for _, in := range rep.Instances {
		for _, s := range in.Busy {
			ats = append(ats, s.At.UnixNano())
		}
	}
	slices.Sort(ats)
	return ats
}

// mergePairs merges neighbouring equal samples ending by cut, two into one.
func mergePairs(busy []domain.BusySample, cut time.Time) ([]domain.BusySample, int) {
	out := busy[:0:0]
	merged := 0
	for i := 0; i < len(busy); i++ {
		a := busy[i]
		if i+1 < len(busy) {
			b := busy[i+1]
			if b.Period == a.Period && b.At.Equal(a.At.Add(a.Period)) && !b.At.Add(b.Period).After(cut) {
				out = append(out, domain.BusySample{At: a.At, Period: 2 * a.Period, Share: (a.Share + b.Share) / 2})
				merged++
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out, merged
}

// dropOldest drops rep's n oldest samples and returns the oldest start kept.
func dropOldest(rep *domain.UsageReport, n int) time.Time {
	ats := sampleStarts(*rep)
	if n >= len(ats) {
		for i := range rep.Instances {
			rep.Instances[i].Busy = nil
		}
		return time.Unix(0, ats[len(ats)-1]).Add(time.Nanosecond).UTC()
	}
	keep := ats[n]
	atKeep := n - slices.Index(ats, keep)
	for i := range rep.Instances {
		busy := rep.Instances[i].Busy
		out := busy[:0:0]
		for _, s := range busy {
			at := s.At.UnixNano()
			if at < keep {
				continue
			}
			if at == keep && atKeep > 0 {
				atKeep--
				continue
			}
			out = append(out, s)
		}
		rep.Instances[i].Busy = out
	}
	return time.Unix(0, keep).UTC()
}

// capNoteOf is the cap's sentence in a kept report's note, "" if none.
func capNoteOf(note string) string {
	for _, part := range strings.Split(note, "; ") {
		if strings.HasPrefix(part, keptCapSays) {
			// The sentence runs to the end: its parts join with "; ".
			return note[strings.Index(note, part):]
		}
	}
	return ""
}

// withCapNote puts the cap's sentence last in note, replacing an earlier one.
func withCapNote(note, capped string) string {
	if capped == "" {
		return note
	}
	old := capNoteOf(note)
	if old != "" {
		note = strings.TrimSuffix(strings.TrimSuffix(note, old), "; ")
	}
	if i := strings.Index(old, dropSays); i >= 0 && !strings.Contains(capped, dropSays) {
		capped += "; " + old[i:] // what was dropped stays dropped
	}
	if note == "" {
		return capped
	}
	return note + "; " + capped
}

// capForKeeping is rep within the cap, its note saying so.
func capForKeeping(rep domain.UsageReport) domain.UsageReport {
	out, says := capKept(rep, maxKeptSamples)
	if says != "" {
		out.Note = withCapNote(out.Note, says)
	}
	return out
}
