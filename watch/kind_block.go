package watch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/present"
)

// BlockRule waits for a block or reservation on sale: GPUs (or Instances) of
// the model for Hours, starting in the range, at most MaxUSDGPUHour.
type BlockRule struct {
	GPU       string `yaml:"gpu"`
	GPUs      int    `yaml:"gpus,omitempty"`
	Instances int    `yaml:"instances,omitempty"`
	// Hours is the block's length, whole hours.
	Hours float64 `yaml:"hours"`
	// StartAfter and StartBefore bound the start (ParseRuleTime); empty: now, and as far as sold.
	StartAfter  string `yaml:"start_after,omitempty"`
	StartBefore string `yaml:"start_before,omitempty"`
	// MaxUSDGPUHour is the price per GPU-hour to be under; nil: any.
	MaxUSDGPUHour *float64 `yaml:"max_usd_gpu_hour,omitempty"`
	// Regions narrows the search; empty asks every region.
	Regions []string `yaml:"regions,omitempty"`
}

func init() {
	register(Kind{Name: "block", New: func() Condition { return &BlockRule{} }, When: onSchedule})
}

// Block limits (domain.CapacityBlockTerms).
const (
	maxBlockGPUs  = 512
	maxBlockHours = 4368
)

// Validate implements Condition.
func (b *BlockRule) Validate() error {
	if b.GPU == "" {
		return ruleErr("", "gpu: missing; want one GPU model, one of %s", strings.Join(domain.GPUModels, ", "))
	}
	g, ok := domain.CanonicalGPU(b.GPU)
	if !ok {
		return ruleErr("gpu", "unknown GPU %q; want one of %s", b.GPU, strings.Join(domain.GPUModels, ", "))
	}
	b.GPU = g
	most := domain.CapacityBlockTerms.MaxInstances
	switch {
	case b.GPUs != 0 && b.Instances != 0:
		return ruleErr("instances", "gpus and instances are both set; want one of them")
	case b.GPUs == 0 && b.Instances == 0:
		return ruleErr("", "gpus: missing; want the number of GPUs, 1 to %d (or instances, 1 to %d)", maxBlockGPUs, most)
	case b.GPUs < 0 || b.GPUs > maxBlockGPUs:
		return ruleErr("gpus", "%d; want a whole number of GPUs from 1 to %d (a block holds at most %d instances)", b.GPUs, maxBlockGPUs, most)
	case b.Instances < 0 || b.Instances > most:
		return ruleErr("instances", "%d; want a whole number of instances from 1 to %d", b.Instances, most)
	}
	if b.Hours == 0 {
		return ruleErr("", "hours: missing; want the block's length in whole hours, 1 to %d (AWS blocks: %s)", maxBlockHours, domain.CapacityBlockTerms.DurationForm)
	}
	if badFloat(b.Hours) || b.Hours != math.Trunc(b.Hours) || b.Hours < 1 || b.Hours > maxBlockHours {
		return ruleErr("hours", "%v; want whole hours from 1 to %d (AWS blocks: %s)", b.Hours, maxBlockHours, domain.CapacityBlockTerms.DurationForm)
	}
	after, before, err := b.Window(time.Now())
	if err != nil {
		return err
	}
	if !after.IsZero() && !before.IsZero() && !before.After(after) {
		return ruleErr("start_before", "%s is not after start_after %s, so no block could start between them; want a later start_before",
			before.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339))
	}
	if b.MaxUSDGPUHour != nil && (badFloat(*b.MaxUSDGPUHour) || *b.MaxUSDGPUHour <= 0) {
		return ruleErr("max_usd_gpu_hour", "%v: no block costs that little; want a price per GPU-hour above 0 such as 6", *b.MaxUSDGPUHour)
	}
	for i, r := range b.Regions {
		if !config.ValidRegion(r) {
			return ruleErr(fmt.Sprintf("regions[%d]", i), "bad region %q; want %s", r, config.RegionForm)
		}
	}
	return nil
}

// Window returns the rule's start range as of now; a bound not set is zero.
func (b *BlockRule) Window(now time.Time) (after, before time.Time, err error) {
	if b.StartAfter != "" {
		if after, err = ParseRuleTime(b.StartAfter, now); err != nil {
			return after, before, ruleErr("start_after", "%v", err)
		}
	}
	if b.StartBefore != "" {
		if before, err = ParseRuleTime(b.StartBefore, now); err != nil {
			return after, before, ruleErr("start_before", "%v", err)
		}
	}
	return after, before, nil
}

// Describe implements Condition.
func (b *BlockRule) Describe() string {
	size := fmt.Sprintf("%g %s", float64(b.GPUs), b.GPU)
	if b.Instances > 0 {
		size = fmt.Sprintf("%d instances of %s", b.Instances, b.GPU)
	}
	s := fmt.Sprintf("block ≥%s × %gh", size, b.Hours)
	if b.StartAfter != "" || b.StartBefore != "" {
		s += fmt.Sprintf(" starting %s…%s", cmp.Or(b.StartAfter, "now"), cmp.Or(b.StartBefore, "as sold"))
	}
	if b.MaxUSDGPUHour != nil {
		s += fmt.Sprintf(" under $%g/GPU-h", *b.MaxUSDGPUHour)
	}
	return s
}

// check asks the providers that sell blocks for its length and regions.
func (b *BlockRule) check(inUse []domain.Descriptor) error {
	var sellers []domain.Descriptor
	for _, d := range inUse {
		if len(d.Sells) > 0 {
			sellers = append(sellers, d)
		}
	}
	if len(sellers) == 0 {
		return ruleErr("", "none of the providers in use (%s) sells capacity blocks or reservations; want a run with one that does (sim, aws, azure)", names(inUse))
	}
	d := time.Duration(b.Hours) * time.Hour
	var forms []string
	sold := false
	for _, s := range sellers {
		for _, t := range s.Sells {
			sold = sold || t.ValidDuration(d) == nil
			forms = append(forms, s.Name+" "+t.Name+"s: "+t.DurationForm)
		}
	}
	if !sold {
		return ruleErr("hours", "%g hours is a length none of the providers in use sells; want %s", b.Hours, strings.Join(forms, "; "))
	}
	for i, r := range b.Regions {
		known := false
		for _, s := range sellers {
			known = known || s.KnowsRegion(r)
		}
		if !known {
			return ruleErr(fmt.Sprintf("regions[%d]", i), "%s is a region none of the providers that sell blocks (%s) knows; want one such as %s", r, names(inUse), regionExamples(sellers))
		}
	}
	return nil
}

// expired refuses a new rule whose latest start has passed.
func (b *BlockRule) expired(now time.Time) error {
	if _, before, err := b.Window(now); err == nil && !before.IsZero() && before.Before(now) {
		return fmt.Errorf("the latest start %s has passed: no block could start in the range", before.UTC().Format(time.RFC3339))
	}
	return nil
}

func (b *BlockRule) evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round) {
	if e.opt.Offerings == nil {
		e.sayOnce(r, "no booking service in this run: block rules are not evaluated")
		return
	}
	now := e.now()
	after, before, _ := b.Window(now)
	if !before.IsZero() && before.Before(now) {
		e.sayOnce(r, fmt.Sprintf("its start range ended at %s: it will not fire again (remove it)", before.UTC().Format(time.RFC3339)))
		return
	}
	if lead := e.opt.MaxLead; lead > 0 && !after.IsZero() && after.After(now.Add(lead)) {
		e.sayOnce(r, fmt.Sprintf("blocks starting from %s are not on sale yet (they are sold up to %s ahead): searching from %s",
			after.UTC().Format("2006-01-02"), domain.FormatWindow(lead), after.Add(-lead).UTC().Format("2006-01-02 15:04 UTC")))
		return
	}
	q := domain.OfferingQuery{GPU: b.GPU, GPUs: b.GPUs, Instances: b.Instances, Duration: time.Duration(b.Hours) * time.Hour,
		StartAfter: after, StartBefore: before, Regions: b.Regions}
	s := rd.search(ctx, e, q)
	if ctx.Err() != nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(s.res.Failed)) {
		e.sayOnce(r, fmt.Sprintf("%s refused the search: %v", name, s.res.Failed[name]))
	}
	if s.err != nil && len(s.res.Failed) == 0 {
		e.sayOnce(r, fmt.Sprintf("search failed: %v", s.err))
		return
	}
	var match *domain.Offering
	for i := range s.res.Offerings {
		o := &s.res.Offerings[i]
		if b.GPUs > 0 && o.GPUCount() < float64(b.GPUs) || b.Instances > 0 && o.InstanceCount < b.Instances {
			continue
		}
		p := o.USDPerGPUHour()
		if math.IsNaN(p) || (b.MaxUSDGPUHour != nil && p > *b.MaxUSDGPUHour) {
			continue
		}
		if match == nil || p < match.USDPerGPUHour() {
			match = o
		}
	}
	if match == nil && len(s.res.Failed) > 0 {
		// A provider that did not answer may have had one: "none" is not known.
		return
	}
	if len(s.res.Failed) == 0 {
		e.clearNote(r)
	}
	var o domain.Offering
	if match != nil {
		o = *match
	}
	e.step(ctx, r, crossing(match != nil, now, r.Cooldown, func() *Alert {
		a := &Alert{Simulated: o.Simulated, Provider: strp(o.Provider), Region: strp(o.Region), Zone: strp(o.Zone),
			InstanceType: strp(o.InstanceType), GPUModel: strp(o.GPU.Model), GPUCount: fp(o.GPUCount()),
			USDGPUHour: fp(o.USDPerGPUHour()), TotalUSD: fp(o.UpfrontUSD), OfferingID: strp(o.ID), Start: tp(o.Start), End: tp(o.End)}
		if b.MaxUSDGPUHour != nil {
			a.ThresholdUSD = fp(*b.MaxUSDGPUHour)
		}
		a.Text = fmt.Sprintf("%s on sale: %d × %s (%s %s) in %s, %g h from %s, $%s/GPU-h, $%.2f in all — gpumarket book %s%s",
			o.Terms().Name, o.InstanceCount, present.DisplayType(o.InstanceType), present.GPUCount(o.GPUCount()), o.GPU.Model,
			present.Place(o.Region, o.Zone), o.DurationHours(), o.Start.UTC().Format("Mon 2006-01-02 15:04 UTC"),
			present.Money(o.USDPerGPUHour()), o.UpfrontUSD, o.ID, simNote(o.Simulated))
		return a
	}))
}
