package sim

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func usageQuery(ref, kind string, n int, start, end, to time.Time) domain.UsageQuery {
	q := domain.UsageQuery{Ref: ref, Kind: kind, ProviderRef: "x-" + ref, Region: "us-east-1", InstanceType: "g6.xlarge",
		InstanceCount: n, Start: start, End: end, From: start, To: to}
	if kind == domain.KindBlock {
		q.InstanceType, q.Zone = "p5.48xlarge", "us-east-1a"
	}
	return q
}

func TestSimUsageIsDeterministicPerSeed(t *testing.T) {
	start := wed.Add(-48 * time.Hour)
	q := usageQuery("01ROW", domain.KindFleet, 6, start, time.Time{}, wed)
	a, err := newAt(1, wed).Usage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newAt(1, wed).Usage(ctx, q)
	if !reflect.DeepEqual(a, b) {
		t.Error("two markets of the same seed told different stories")
	}
	c, _ := newAt(2, wed).Usage(ctx, q)
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 1 and 2 told the same story")
	}
	// A later span does not rewrite the past: the samples of the first
	// 24 hours are the same asked alone.
	early := q
	early.To = start.Add(24 * time.Hour)
	e, _ := newAt(1, wed).Usage(ctx, early)
	for i, in := range e.Instances {
		for j, s := range in.Busy {
			if j < len(a.Instances[i].Busy) && a.Instances[i].Busy[j].At.Equal(s.At) && s.Period == time.Hour && a.Instances[i].Busy[j] != s {
				t.Fatalf("instance %s hour %s: %v asked to %s, %v asked to now", in.ID, s.At, s, early.To, a.Instances[i].Busy[j])
			}
		}
	}
}

// TestSimUsageHasIdleInterruptedAndUnmeasuredRows: across rows, the
// simulated market shows what the Usage view must show — busy rows, idle
// ones, interrupted spot instances, rows without metrics — and nothing
// outside the rules (shares in [0, 1], samples within the instance's run,
// on-demand instances never interrupted). The fleets launch at different
// times: where a fleet's spot instances go, and when they are taken back,
// is its pools' capacity from its launch on.
func TestSimUsageHasIdleInterruptedAndUnmeasuredRows(t *testing.T) {
	m := newAt(1, wed)
	var idle, busy, interrupted, noMetrics int
	for i := range 40 {
		start := wed.Add(-72*time.Hour + time.Duration(i)*47*time.Minute)
		q := usageQuery(fmt.Sprintf("ROW%02d", i), domain.KindFleet, 4, start, time.Time{}, wed)
		q.OnDemand = 1
		rep, err := m.Usage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Source == "" {
			noMetrics++
			if rep.Note == "" {
				t.Errorf("%s: no metrics and no note saying why", q.Ref)
			}
		}
		var sum, n float64
		for _, in := range rep.Instances {
			if in.Interrupted {
				interrupted++
				if !in.Spot {
					t.Errorf("%s: on-demand instance %s interrupted", q.Ref, in.ID)
				}
				if in.End.IsZero() || !in.End.After(in.Start) {
					t.Errorf("%s: interrupted instance %s has no end after its start", q.Ref, in.ID)
				}
			}
			for _, s := range in.Busy {
				if s.Share < 0 || s.Share > 1 || s.At.Before(in.Start) || (!in.End.IsZero() && s.At.Add(s.Period).After(in.End)) {
					t.Errorf("%s: sample %+v outside the run of %s [%s, %s]", q.Ref, s, in.ID, in.Start, in.End)
				}
				sum += s.Share
				n++
			}
		}
		if n > 0 {
			switch mean := sum / n; {
			case mean < 0.15:
				idle++
			case mean > 0.5:
				busy++
			}
		}
	}
	if idle == 0 || busy == 0 || interrupted == 0 || noMetrics == 0 {
		t.Errorf("idle %d, busy %d, interrupted %d, without metrics %d rows: want some of each", idle, busy, interrupted, noMetrics)
	}
}

func TestSimUsageBlockInstancesStartInTheWindow(t *testing.T) {
	m := newAt(1, wed)
	start := wed.Add(-10 * time.Hour)
	for i := range 16 {
		q := usageQuery(fmt.Sprintf("B%02d", i), domain.KindBlock, 2, start, start.Add(24*time.Hour), wed)
		rep, err := m.Usage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range rep.Instances {
			if in.Spot || in.Interrupted || in.Zone != "us-east-1a" || in.Start.Before(start) || !in.Start.Before(wed) || !in.End.IsZero() {
				t.Errorf("%s: block instance %+v", q.Ref, in)
			}
		}
	}
	if _, err := m.Usage(ctx, domain.UsageQuery{Ref: "x", To: wed}); err == nil {
		t.Error("a query without a start or instances was answered")
	}
}

// TestHashPrefixIsStrHash: the busy samples' hashing, done in parts, is
// strHash's, so the samples are what they were.
func TestHashPrefixIsStrHash(t *testing.T) {
	for _, v := range []int64{0, 7, -3, 1764082800, math.MaxInt64} {
		p := newHashPrefix("usage-busy", "1", "01ROW", "12")
		if got, want := p.withInt(v), strHash("usage-busy", "1", "01ROW", "12", fmt.Sprint(v)); got != want {
			t.Errorf("%d: %x, strHash says %x", v, got, want)
		}
	}
}
