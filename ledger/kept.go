package ledger

import (
	"context"
	"fmt"
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
