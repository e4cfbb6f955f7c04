package ledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Kept keeps what each row's provider last showed of its usage: the clouds forget.
type Kept interface {
	// LoadUsage returns the kept report and when it was read; false when none.
	LoadUsage(ctx context.Context, rowID string) (domain.UsageReport, time.Time, bool, error)
	SaveUsage(ctx context.Context, rowID string, rep domain.UsageReport, at time.Time) error
}

// readOnly is a Kept that saves nothing (a read-only store).
type readOnly interface{ ReadOnly() bool }

// runKey tells one run of an instance from another: a VM may run several times under one id.
type runKey struct {
	id    string
	start int64
}

func keyOf(in domain.InstanceUsage) runKey { return runKey{in.ID, in.Start.UnixNano()} }

// merge is the kept report and a newer read together (docs/DESIGN.md, "What the clouds forget is kept").
func merge(kept domain.UsageReport, keptAt time.Time, newer domain.UsageReport) domain.UsageReport {
	out := domain.UsageReport{Source: newer.Source, Note: withCapNote(newer.Note, capNoteOf(kept.Note)),
		InterruptionsUnknown: newer.InterruptionsUnknown}
	keptRuns := map[runKey]domain.InstanceUsage{}
	for _, in := range kept.Instances {
		keptRuns[keyOf(in)] = in
	}
	listed := map[runKey]bool{}
	newerRuns := map[string][]domain.InstanceUsage{}
	newerSamples := false
	for _, in := range newer.Instances {
		k := keyOf(in)
		listed[k] = true
		newerRuns[in.ID] = append(newerRuns[in.ID], in)
		newerSamples = newerSamples || len(in.Busy) > 0
		if old, ok := keptRuns[k]; ok {
			in.Busy = unionSamples(old.Busy, in.Busy)
		}
		in.EndLastSeen = false
		out.Instances = append(out.Instances, in)
	}
	keptSamples := false
	for _, in := range kept.Instances {
		if listed[keyOf(in)] {
			continue
		}
		if in.End.IsZero() {
			in.End, in.EndLastSeen = keptAt, true
		}
		for _, piece := range uncovered(in, newerRuns[in.ID]) {
			if listed[keyOf(piece)] {
				// Overlapping kept runs cut to the same piece: nothing counts twice.
				continue
			}
			listed[keyOf(piece)] = true
			keptSamples = keptSamples || len(piece.Busy) > 0
			out.Instances = append(out.Instances, piece)
		}
	}
	if out.Source == "" && !newerSamples && keptSamples {
		out.Source = kept.Source
	} else if kept.Source != "" && out.Source != "" && kept.Source != out.Source && keptSamples {
		out.Source += "; earlier samples: " + kept.Source
	}
	sort.SliceStable(out.Instances, func(i, j int) bool {
		a, b := out.Instances[i], out.Instances[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Start.Before(b.Start)
	})
	return out
}

// unionSamples are both sets by start, oldest first, b's where both have one.
func unionSamples(a, b []domain.BusySample) []domain.BusySample {
	if len(a) == 0 {
		return b
	}
	byAt := make(map[int64]domain.BusySample, len(a)+len(b))
	for _, s := range a {
		byAt[s.At.UnixNano()] = s
	}
	for _, s := range b {
		byAt[s.At.UnixNano()] = s
	}
	out := make([]domain.BusySample, 0, len(byAt))
	for _, s := range byAt {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// uncovered is run in cut to the time no newer run of its instance covers.
func uncovered(in domain.InstanceUsage, newer []domain.InstanceUsage) []domain.InstanceUsage {
	type span struct{ from, to time.Time }
	pieces := []span{{in.Start, in.End}}
	for _, n := range newer {
		var next []span
		for _, p := range pieces {
			nEnd := n.End
			if nEnd.IsZero() || nEnd.After(p.to) {
				nEnd = p.to
			}
			if !n.Start.Before(p.to) || !nEnd.After(p.from) {
				next = append(next, p) // no overlap
				continue
			}
			if n.Start.After(p.from) {
				next = append(next, span{p.from, n.Start})
			}
			if nEnd.Before(p.to) {
				next = append(next, span{nEnd, p.to})
			}
		}
		pieces = next
	}
	var out []domain.InstanceUsage
	for _, p := range pieces {
		if !p.to.After(p.from) {
			continue
		}
		c := in
		c.Start, c.End, c.Busy = p.from, p.to, nil
		if !p.to.Equal(in.End) {
			c.Interrupted, c.EndLastSeen = false, false
		}
		for _, s := range in.Busy {
			if s.At.Before(p.to) && s.At.Add(s.Period).After(p.from) {
				c.Busy = append(c.Busy, s)
			}
		}
		out = append(out, c)
	}
	return out
}

// bound keeps the runs and samples of rep that overlap [start, end).
func bound(rep domain.UsageReport, start, end time.Time) domain.UsageReport {
	out := rep
	out.Instances = nil
	overlaps := func(from, to time.Time) bool {
		return (to.IsZero() || to.After(start)) && (end.IsZero() || from.Before(end))
	}
	for _, in := range rep.Instances {
		if !overlaps(in.Start, in.End) {
			continue
		}
		busy := in.Busy
		in.Busy = nil
		for _, s := range busy {
			if overlaps(s.At, s.At.Add(s.Period)) {
				in.Busy = append(in.Busy, s)
			}
		}
		out.Instances = append(out.Instances, in)
	}
	return out
}

// closeOpen ends at at the runs still running when rep was read.
func closeOpen(rep domain.UsageReport, at time.Time) domain.UsageReport {
	out := rep
	out.Instances = append([]domain.InstanceUsage(nil), rep.Instances...)
	for i := range out.Instances {
		if out.Instances[i].End.IsZero() {
			out.Instances[i].End = at
		}
	}
	return out
}

// lastSeenNote says how many instances count only until last seen, or "".
func lastSeenNote(rep domain.UsageReport, start, end time.Time) string {
	n := 0
	var first, last time.Time
	for _, in := range rep.Instances {
		if !in.EndLastSeen || !in.End.Before(end) || !in.End.After(start) {
			continue
		}
		n++
		if first.IsZero() || in.End.Before(first) {
			first = in.End
		}
		if in.End.After(last) {
			last = in.End
		}
	}
	if n == 0 {
		return ""
	}
	what := "1 instance no longer listed by the cloud: counted until last seen"
	may := "it may have run a little longer"
	if n > 1 {
		what = fmt.Sprintf("%d instances no longer listed by the cloud: counted until last seen", n)
		may = "they may have run a little longer"
	}
	when := "at " + utcMinute(last)
	if !first.Equal(last) {
		when = fmt.Sprintf("between %s and %s", utcMinute(first), utcMinute(last))
	}
	return fmt.Sprintf("%s %s (%s)", what, when, may)
}

// utcMinute is a time as the notes say it: "2026-03-05 14:55 UTC".
func utcMinute(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") + " UTC" }

// keptNote says when kept figures were read and why they stand.
func keptNote(at time.Time, why string) string {
	return fmt.Sprintf("figures as last read at %s, kept in the ledger (%s)", utcMinute(at), strings.TrimSpace(why))
}

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
