package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// maxKeptSamples caps the busy samples kept per row: a 64-instance fleet
// sampled hourly fills it in about two months, and its report is some
// 1 MB (a report of 13 million samples took 8 s and 943 MB to read).
const maxKeptSamples = 100_000

// keptCapSays starts the note of a capped kept report; a later read finds
// it by this prefix to carry it on.
const keptCapSays = "the usage kept in the ledger is capped at "

const dropSays = "those before "

// maxMergeRounds bounds the merging: each round halves what the oldest
// half holds, so a few rounds reach any cap that merging can.
const maxMergeRounds = 12

// capKept bounds rep to max busy samples: the oldest half's neighbouring
// samples of one instance are merged into one twice as long (busy hours
// kept: the share is their mean), round after round, and the oldest
// dropped if that is not enough. It returns what it did as a note ("" when
// rep was within the cap).
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

// oldestHalfEnd is the start of the median sample: the samples before it
// are the oldest half.
func oldestHalfEnd(rep domain.UsageReport) time.Time {
	ats := make([]int64, 0, countSamples(rep))
	for _, in := range rep.Instances {
		for _, s := range in.Busy {
			ats = append(ats, s.At.UnixNano())
		}
	}
	slices.Sort(ats)
	return time.Unix(0, ats[len(ats)/2]).UTC()
}

// mergePairs merges each pair of neighbouring samples (the second starts
// where the first ends, both as long) that ends by cut into one; it
// returns the samples and how many fewer there are.
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

// dropOldest drops the n oldest samples of rep (its instances are its
// own) and returns the start of the oldest sample kept.
func dropOldest(rep *domain.UsageReport, n int) time.Time {
	ats := make([]int64, 0, countSamples(*rep))
	for _, in := range rep.Instances {
		for _, s := range in.Busy {
			ats = append(ats, s.At.UnixNano())
		}
	}
	slices.Sort(ats)
	if n >= len(ats) {
		for i := range rep.Instances {
			rep.Instances[i].Busy = nil
		}
		return time.Unix(0, ats[len(ats)-1]).Add(time.Nanosecond).UTC()
	}
	// Every sample before keep goes, and of those starting at keep just
	// enough to drop n.
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

// withCapNote is note with the cap's sentence put last, in place of any
// earlier one; note as it is when capped is "".
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

// capForKeeping is rep as the ledger keeps it: within the cap, the note
// saying so when it is not whole.
func capForKeeping(rep domain.UsageReport) domain.UsageReport {
	out, says := capKept(rep, maxKeptSamples)
	if says != "" {
		out.Note = withCapNote(out.Note, says)
	}
	return out
}
