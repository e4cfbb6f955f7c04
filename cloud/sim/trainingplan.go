package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

var planTerms = domain.TrainingPlanTerms

const planNote = "simulated SageMaker training plan: paid upfront, no refund; it serves only its target resource (%s); its instances are reserved for its segments' windows only; SageMaker has no dry run"

// planDryRun answers a dry run of a plan as the AWS provider does: SageMaker has none.
const planDryRun = "SageMaker has no dry run for CreateTrainingPlan: the offering is still on sale at these terms; nothing was sent (simulated market)"

// planOffers returns training plans of n instances of an AWS pool: one segment
// per start, and one split in two whole-day windows, as SageMaker answers.
func (m *Market) planOffers(p *simPool, n int, v offerQuery) []domain.Offering {
	if !v.plans || !planTerms.ValidCount(n) || planTerms.ValidDuration(v.dur) != nil {
		return nil
	}
	rate, ok := blockRate[p.spec.Desc.InstanceType]
	if !ok {
		return nil
	}
	key := p.spec.Desc.Key().String()
	var out []domain.Offering
	// Training plans are made of capacity blocks: they start at the blocks' time of day.
	for _, day := range dailyStarts(v.startAfter.UTC(), v.startBefore, blockTerms.StartOfDayUTC) {
		if len(out) == offersPerPool {
			break
		}
		h := mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15 ^ strHash("plan", key, day.Format(time.RFC3339), fmt.Sprint(n), v.dur.String()))
		if unit(h) >= 0.35 {
			continue
		}
		segs := []domain.Segment{{Start: day, End: day.Add(v.dur)}}
		days := int(v.dur / (24 * time.Hour))
		if days >= 2 && unit(mix(h^1)) < 0.5 {
			first := time.Duration((days+1)/2) * 24 * time.Hour
			gap := time.Duration(1+mix(h^2)%2) * 24 * time.Hour
			segs = []domain.Segment{{Start: day, End: day.Add(first)}, {Start: day.Add(first + gap), End: day.Add(v.dur + gap)}}
		}
		for i := range segs {
			segs[i].InstanceType, segs[i].InstanceCount, segs[i].Zone = p.spec.Desc.InstanceType, n, p.spec.Desc.Zone
		}
		target := domain.TargetTrainingJob
		if mix(h^3)%3 == 0 {
			target = domain.TargetHyperPodCluster
		}
		o := p.offering(n, segs[0].Start, segs[len(segs)-1].End, domain.KindTrainingPlan)
		o.Segments, o.TargetResource, o.Note = segs, target, fmt.Sprintf(planNote, target)
		// As blocks, sooner starts are dearer; a split plan is a little cheaper.
		r := m.leadRate(rate, day, planTerms.MaxLead, unit(mix(h^4)))
		if len(segs) > 1 {
			r *= 0.95
		}
		o.UpfrontUSD = math.Round(r*o.GPU.Count*float64(n)*o.HeldHours()*100) / 100
		o.ID = m.offeringID(o)
		out = append(out, o)
	}
	return out
}

func (m *Market) planID(o domain.Offering) string {
	parts := []string{"plan", o.Region, o.Zone, o.InstanceType, o.TargetResource,
		fmt.Sprint(o.InstanceCount, int64(math.Round(o.UpfrontUSD*100)))}
	for _, s := range o.Segments {
		parts = append(parts, s.Zone, s.InstanceType, fmt.Sprint(s.InstanceCount, s.Start.Unix(), s.End.Unix()))
	}
	return fmt.Sprintf("tpo-%016x", mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15^strHash(parts...)))
}

func planARN(o domain.Offering, h uint64) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:000000000000:training-plan/gpumarket-%016x", o.Region, h)
}

// refreshPlan describes a plan offering as the same search answers it now.
func (m *Market) refreshPlan(p *simPool, o domain.Offering) (domain.Offering, error) {
	v := offerQuery{instances: o.InstanceCount, dur: time.Duration(o.HeldHours() * float64(time.Hour)), startAfter: o.Start, startBefore: o.Start, plans: true}
	for _, c := range m.planOffers(p, o.InstanceCount, v) {
		if c.TargetResource == o.TargetResource && slices.Equal(c.Segments, o.Segments) {
			return c, nil
		}
	}
	return domain.Offering{}, fmt.Errorf("sim training plan offering %s is no longer on sale: %w", o.ID, domain.ErrOfferingGone)
}
