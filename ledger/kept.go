package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Kept keeps, per ledger row, what the row's provider last showed of its
// usage, because the clouds forget: EC2 lists a terminated instance for
// about an hour, and Azure says nothing of a capacity reservation once it
// is deleted (gpumarket deletes one at its end). The ledger's store
// implements it (the usage_kept table).
type Kept interface {
	// LoadUsage returns the report kept for the row and when it was
	// read; false when none is kept.
	LoadUsage(ctx context.Context, rowID string) (domain.UsageReport, time.Time, bool, error)
	// SaveUsage keeps rep as read at at.
	SaveUsage(ctx context.Context, rowID string, rep domain.UsageReport, at time.Time) error
}

// readOnly is a Kept that can tell it saves nothing (a store opened
// read-only): Compute then reads what is kept and does not try to save.
type readOnly interface{ ReadOnly() bool }

// runKey is what tells one run of an instance from another: a VM may
// run several times under one id (cloud/azure splits a VM's runs
// where it was deallocated).
type runKey struct {
	id    string
	start int64
}

func keyOf(in domain.InstanceUsage) runKey { return runKey{in.ID, in.Start.UnixNano()} }

// merge is what the kept report (read at keptAt) and a newer read show
// together:
//   - an instance run (by id and start) the newer read lists is the newer
//     read's, its busy samples the union of both by start (the newer
//     read's where both have one);
//   - one it no longer lists is kept as it was, and if it was running when
//     last read, it is taken to have ended then (EndLastSeen): it was seen
//     running until keptAt and may have run a little longer;
//   - a kept run is cut to the time the newer read's runs of the same
//     instance do not cover (a run the cloud now starts later, because
//     its earliest hours fell out of the span asked, is counted once);
//   - Source, Note and InterruptionsUnknown are the newer read's (Source
//     the kept one's when the newer read has no samples; the note keeps
//     the kept one's word that it was capped).
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
				// Two kept runs of one instance that overlapped (no
				// cloud reports that, but nothing is counted twice)
				// cut to the same piece.
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

// unionSamples are the samples of both, by start, oldest first: b's where
// both have one (b is the newer read; a sample of the hour in progress
// grows from read to read).
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

// uncovered is the ended run in cut to the time that none of the newer
// runs of the same instance covers: zero, one or more pieces, each with
// the samples that overlap it. Only the last piece keeps the run's end,
// and so its interruption and EndLastSeen.
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

// bound keeps of rep what can count for a row whose capacity ran over
// [start, end) (a zero end: still running): the runs and samples that
// overlap it. It is what bounds what is kept of a row.
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

// closeOpen ends, at at, the runs of rep still running when it was read:
// figures "as last read" count what was seen then, not a guess since.
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

// lastSeenNote says how many instances of rep are counted only until they
// were last seen, within a row whose span ends at end: "2 instances no
// longer listed by the cloud: counted until last seen at 2026-03-05 14:55
// UTC (they may have run a little longer)". "" when none is, or when the
// row's span had ended before (nothing of the span is missing).
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

// keptNote is the note of figures that are the kept ones: when they were
// read, and why the live read did not replace them.
func keptNote(at time.Time, why string) string {
	return fmt.Sprintf("figures as last read at %s, kept in the ledger (%s)", utcMinute(at), strings.TrimSpace(why))
}
