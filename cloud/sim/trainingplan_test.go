package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// TestTrainingPlansOnSim: plans of one and two segments, in AWS regions
// only, each segment whole days of the asked count, the held hours the
// asked length; refused counts and lengths named; bought as a plan ARN.
func TestTrainingPlansOnSim(t *testing.T) {
	m := newAt(1, wed)
	q := domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 48 * time.Hour}
	offers, err := m.FindOfferings(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	bySegs := map[int]int{}
	var two domain.Offering
	for _, o := range offers {
		if o.Kind != domain.KindTrainingPlan {
			continue
		}
		bySegs[len(o.Segments)]++
		if o.Cloud != domain.CloudAWS || !strings.HasPrefix(o.ID, "tpo-") {
			t.Errorf("%s: a training plan in %s, want AWS only with a tpo- id", o.ID, o.Cloud)
		}
		if o.TargetResource != domain.TargetTrainingJob && o.TargetResource != domain.TargetHyperPodCluster {
			t.Errorf("%s: target %q", o.ID, o.TargetResource)
		}
		if o.HeldHours() != 48 {
			t.Errorf("%s holds %v h, want 48", o.ID, o.HeldHours())
		}
		for i, s := range o.Segments {
			if s.InstanceCount != 2 || s.InstanceType != o.InstanceType || s.End.Sub(s.Start)%(24*time.Hour) != 0 ||
				(i > 0 && !s.Start.After(o.Segments[i-1].End)) || s.Start.UTC().Hour() != 11 {
				t.Errorf("%s segment %d: %+v, want whole days of 2 × %s from 11:30 UTC, after the one before", o.ID, i, s, o.InstanceType)
			}
		}
		if len(o.Segments) == 2 {
			two = o
		}
	}
	if bySegs[1] == 0 || bySegs[2] == 0 {
		t.Fatalf("plans by segments: %v, want one- and two-segment plans", bySegs)
	}
	only := q
	only.Kinds = []string{domain.KindTrainingPlan}
	got, err := m.FindOfferings(ctx, only)
	if err != nil || len(got) != bySegs[1]+bySegs[2] {
		t.Errorf("--kind training-plan: %d offerings (%v), want the %d plans alone", len(got), err, bySegs[1]+bySegs[2])
	}
	for _, c := range []struct {
		q    domain.OfferingQuery
		want string
	}{
		{domain.OfferingQuery{GPU: "H100", Instances: 3, Duration: 48 * time.Hour, Kinds: only.Kinds}, "1, 2, 4, 8, 16, 32 or 64"},
		{domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 36 * time.Hour, Kinds: only.Kinds}, "whole days, 1 to 182"},
	} {
		if _, err := m.FindOfferings(ctx, c.q); !errors.Is(err, domain.ErrInvalidQuery) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a refusal naming %q", c.q, err, c.want)
		}
	}
	fresh, err := m.RefreshOffering(ctx, two)
	if err != nil || fresh.ID != two.ID || len(fresh.Segments) != 2 {
		t.Fatalf("refresh of %s: %+v, %v", two.ID, fresh, err)
	}
	b, err := m.Book(ctx, domain.BookRequest{Offering: two, After: wed})
	if err != nil || !strings.HasPrefix(b.ProviderRef, "arn:aws:sagemaker:"+two.Region+":") || b.State != "scheduled" {
		t.Fatalf("book %s: %+v, %v", two.ID, b, err)
	}
	recs, _ := m.ListRecords(ctx, wed)
	if len(recs) != 1 || recs[0].Kind != domain.KindTrainingPlan {
		t.Errorf("records %+v, want one of kind training-plan", recs)
	}
}
