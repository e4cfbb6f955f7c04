package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/gpumarket/gpumarket/domain"
)

var planTerms = domain.TrainingPlanTerms

// planTargets: a plan serves only the resource it was bought for (API_TrainingPlanOffering).
var planTargets = []smtypes.SageMakerResourceName{smtypes.SageMakerResourceNameTrainingJob, smtypes.SageMakerResourceNameHyperpodCluster}

type sageMakerAPI interface {
	SearchTrainingPlanOfferings(context.Context, *sagemaker.SearchTrainingPlanOfferingsInput, ...func(*sagemaker.Options)) (*sagemaker.SearchTrainingPlanOfferingsOutput, error)
	CreateTrainingPlan(context.Context, *sagemaker.CreateTrainingPlanInput, ...func(*sagemaker.Options)) (*sagemaker.CreateTrainingPlanOutput, error)
	DescribeTrainingPlan(context.Context, *sagemaker.DescribeTrainingPlanInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeTrainingPlanOutput, error)
	sagemaker.ListTrainingPlansAPIClient
	ListTags(context.Context, *sagemaker.ListTagsInput, ...func(*sagemaker.Options)) (*sagemaker.ListTagsOutput, error)
}

// sageMaker returns a region's client; AWS_ENDPOINT_URL_SAGEMAKER reaches it.
func (p *Provider) sageMaker(region string) sageMakerAPI {
	return p.sm.get(region, func() sageMakerAPI {
		return sagemaker.NewFromConfig(p.cfg, func(o *sagemaker.Options) { o.Region = region })
	})
}

func isPlan(o domain.Offering) bool { return o.Kind == domain.KindTrainingPlan }

// withTrainingPlans ranks blocks and plans together; a kind that does not sell
// the terms is left out unless it is the only one asked.
func (p *Provider) withTrainingPlans(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	var out []domain.Offering
	var errs []error
	failed := domain.RegionErrors{}
	keep := func(offs []domain.Offering, err error) {
		out = append(out, offs...)
		var re domain.RegionErrors
		switch {
		case errors.As(err, &re):
			for r, e := range re {
				failed[r] = errors.Join(failed[r], e)
			}
		case err != nil:
			errs = append(errs, err)
		}
	}
	var blockInvalid error
	if q.WantsKind(domain.KindBlock) {
		bq := q
		bq.Kinds = []string{domain.KindBlock}
		offs, err := p.FindOfferings(ctx, bq)
		if errors.Is(err, domain.ErrInvalidQuery) && len(q.Kinds) != 1 {
			blockInvalid = err // the plans may sell these terms
		} else {
			keep(offs, err)
		}
	}
	offs, err := p.findTrainingPlans(ctx, q)
	switch {
	case !errors.Is(err, domain.ErrInvalidQuery) || q.OnlyKind(domain.KindTrainingPlan):
		keep(offs, err)
	case blockInvalid != nil:
		return nil, errors.Join(blockInvalid, err) // neither sells these terms: both say what they do
	}
	rankOfferings(out)
	switch {
	case len(errs) > 0 && len(out) == 0:
		return nil, errors.Join(errs...)
	case len(failed) > 0:
		return out, failed
	}
	return out, nil
}

// validPlanQuery checks a search against what SageMaker sells: count 1, 2, 4 … 64,
// whole days to 182, a start within 8 weeks.
func validPlanQuery(q domain.OfferingQuery, now time.Time) (domain.OfferingQuery, error) {
	model, ok := domain.NormalizeGPUModel(q.GPU)
	if !ok {
		return q, domain.InvalidQueryf("gpu %q: want one of %s", q.GPU, strings.Join(domain.GPUModels, ", "))
	}
	q.GPU = model
	if q.Instances < 0 || q.GPUs < 0 || q.Instances == 0 && q.GPUs == 0 {
		return q, domain.InvalidQueryf("count: want a positive number of instances (%s) or GPUs", planTerms.CountForm)
	}
	if q.Instances > 0 && !planTerms.ValidCount(q.Instances) {
		return q, domain.InvalidQueryf("aws: %v", planTerms.ValidInstances(q.Instances))
	}
	if err := planTerms.ValidDuration(q.Duration); err != nil {
		return q, domain.InvalidQueryf("aws: %v", err)
	}
	q.StartAfter = domain.Later(q.StartAfter, now)
	latest := now.Add(planTerms.MaxLead)
	if q.StartBefore.IsZero() || q.StartBefore.After(latest) {
		q.StartBefore = latest
	}
	if !q.StartBefore.After(q.StartAfter) {
		return q, domain.InvalidQueryf("start range: training plans start within 8 weeks (by %s), after %s",
			latest.UTC().Format(time.RFC3339), q.StartAfter.UTC().Format(time.RFC3339))
	}
	return q, nil
}

// planCount is the count asked, or the GPUs rounded up to a count SageMaker sells; 0 if none.
func planCount(q domain.OfferingQuery, gpusPer float64) int {
	if q.Instances > 0 {
		return q.Instances
	}
	need := int(math.Ceil(float64(q.GPUs)/gpusPer - 1e-9))
	for n := 1; n <= planTerms.MaxInstances; n *= 2 {
		if n >= need {
			return n
		}
	}
	return 0
}

// findTrainingPlans searches every region per instance type and target resource.
func (p *Provider) findTrainingPlans(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	q, err := validPlanQuery(q, p.opt.Now())
	if err != nil {
		return nil, err
	}
	regions, err := p.regions(ctx, domain.Query{Regions: q.Regions})
	if err != nil {
		return nil, err
	}
	var types []domain.CatalogEntry
	for _, e := range domain.CatalogEntries(domain.CloudAWS) {
		if e.GPU.Model == q.GPU && e.GPU.Count > 0 {
			types = append(types, e)
		}
	}
	out, failed := eachRegion(p, regions, func(region string) ([]domain.Offering, error) {
		var offs []domain.Offering
		for _, t := range types {
			n := planCount(q, t.GPU.Count)
			if n == 0 {
				continue
			}
			for _, target := range planTargets {
				got, err := p.searchPlans(ctx, region, t, n, target, q)
				if err != nil {
					return offs, err
				}
				offs = append(offs, got...)
			}
		}
		return offs, nil
	})
	return ranked(out, failed, len(regions))
}

func (p *Provider) searchPlans(ctx context.Context, region string, t domain.CatalogEntry, n int, target smtypes.SageMakerResourceName, q domain.OfferingQuery) ([]domain.Offering, error) {
	res, err := p.sageMaker(region).SearchTrainingPlanOfferings(ctx, &sagemaker.SearchTrainingPlanOfferingsInput{
		InstanceType:    smtypes.ReservedCapacityInstanceType("ml." + t.InstanceType),
		InstanceCount:   awssdk.Int32(int32(n)),
		DurationHours:   awssdk.Int64(int64(q.Duration / time.Hour)),
		StartTimeAfter:  awssdk.Time(q.StartAfter),
		EndTimeBefore:   awssdk.Time(q.StartBefore.Add(q.Duration + q.FlexDuration + 14*24*time.Hour)),
		TargetResources: []smtypes.SageMakerResourceName{target},
	})
	if err != nil {
		// A type SageMaker does not reserve is refused as a bad value.
		if c := apiCode(err); c == "ValidationException" {
			return nil, nil
		}
		return nil, explain(fmt.Errorf("search training plans of %s in %s: %w", t.InstanceType, region, err))
	}
	var out []domain.Offering
	for _, x := range res.TrainingPlanOfferings {
		o, err := planOffering(region, t, x, n)
		if err != nil {
			p.opt.Logger.Warn("training plan offering skipped", "region", region, "reason", err.Error())
			continue
		}
		held := time.Duration(o.HeldHours() * float64(time.Hour))
		if mismatch(o, held, q, 0) != "" {
			continue
		}
		o.FlexLength = held != q.Duration
		out = append(out, o)
	}
	return out, nil
}

// planOffering reads one TrainingPlanOffering, its segments in order of start;
// no id, segment or fee is an error.
func planOffering(region string, t domain.CatalogEntry, x smtypes.TrainingPlanOffering, asked int) (domain.Offering, error) {
	id := awssdk.ToString(x.TrainingPlanOfferingId)
	if id == "" {
		return domain.Offering{}, fmt.Errorf("training plan offering without an id")
	}
	fee, ok := amount(strings.TrimSpace(awssdk.ToString(x.UpfrontFee)))
	if !ok {
		return domain.Offering{}, fmt.Errorf("training plan offering %s: upfront fee %q is not an amount", id, awssdk.ToString(x.UpfrontFee))
	}
	var segs []domain.Segment
	for _, rc := range x.ReservedCapacityOfferings {
		if rc.StartTime == nil {
			return domain.Offering{}, fmt.Errorf("training plan offering %s: a segment has no start", id)
		}
		start := rc.StartTime.UTC()
		end := start.Add(time.Duration(awssdk.ToInt64(rc.DurationHours))*time.Hour + time.Duration(awssdk.ToInt64(rc.DurationMinutes))*time.Minute)
		if rc.EndTime != nil {
			end = rc.EndTime.UTC()
		}
		typ := strings.TrimPrefix(string(rc.InstanceType), "ml.")
		if typ != t.InstanceType {
			return domain.Offering{}, fmt.Errorf("training plan offering %s: a segment of %s, not the %s asked for", id, rc.InstanceType, t.InstanceType)
		}
		if !end.After(start) {
			return domain.Offering{}, fmt.Errorf("training plan offering %s: a segment ends before it starts", id)
		}
		segs = append(segs, domain.Segment{InstanceType: typ, InstanceCount: int(awssdk.ToInt32(rc.InstanceCount)), Zone: awssdk.ToString(rc.AvailabilityZone),
			Start: start, End: end})
	}
	if len(segs) == 0 {
		return domain.Offering{}, fmt.Errorf("training plan offering %s has no reserved capacity", id)
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].Start.Before(segs[j].Start) })
	count := asked
	for _, s := range segs {
		count = min(count, s.InstanceCount) // what every segment holds
	}
	o := domain.Offering{ID: id, Provider: Name, Cloud: domain.CloudAWS, Region: region, Zone: segs[0].Zone,
		InstanceType: t.InstanceType, GPU: t.GPU, InstanceCount: count, Start: segs[0].Start, End: segs[len(segs)-1].End,
		UpfrontUSD: fee, Currency: cmp.Or(awssdk.ToString(x.CurrencyCode), "USD"), Kind: domain.KindTrainingPlan, Segments: segs}
	if len(x.TargetResources) > 0 {
		o.TargetResource = string(x.TargetResources[0])
	}
	o.Note = fmt.Sprintf("SageMaker training plan for %s only: paid upfront, no refund; capacity only in its segments' windows; SageMaker has no dry run", o.TargetResource)
	return o, nil
}

// planName is the ledger row's id, so a lost answer is found by name and never bought twice.
func planName(ref string) string {
	return "gpumarket-" + strings.ToLower(nameUnsafe.ReplaceAllString(ref, "-"))
}

// nameUnsafe: a plan's name is ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}.
var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// noRetrySM: a retried CreateTrainingPlan could buy twice; FindBooking settles it.
func noRetrySM(o *sagemaker.Options) { o.Retryer = awssdk.NopRetryer{} }

// bookTrainingPlan buys a plan named after the ledger row, never retried; a plan
// of that name is answered instead. No dry run: req.DryRun only re-describes.
func (p *Provider) bookTrainingPlan(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	o := req.Offering
	switch {
	case o.ID == "" || o.Region == "":
		return domain.Booking{}, specErrorf("aws: training plan offering %q has no id or region: search again", o.ID)
	case !planTerms.ValidCount(o.InstanceCount):
		return domain.Booking{}, limitErrorf("aws: offering %s: %v", o.ID, planTerms.ValidInstances(o.InstanceCount))
	}
	if req.DryRun {
		if _, err := p.refreshTrainingPlan(ctx, o); err != nil {
			return domain.Booking{}, err
		}
		return offered(o, true, "SageMaker has no dry run for CreateTrainingPlan: the offering is still on sale at these terms; nothing was sent"), nil
	}
	if req.Ref == "" {
		return domain.Booking{}, specErrorf("aws: buying training plan %s needs a ledger row to name it after", o.ID)
	}
	name := planName(req.Ref)
	if prior, err := p.describePlan(ctx, o.Region, name); err != nil {
		return domain.Booking{}, domain.MarkDeclined(fmt.Errorf("aws: look for training plan %s before buying (nothing was bought): %w", name, err))
	} else if prior != nil {
		prior.CostUSD = o.UpfrontUSD
		prior.Message = "already bought as " + prior.ProviderRef + prior.Message + "; not bought again"
		return *prior, nil
	}
	var tags []smtypes.Tag
	all := blockTags(req, o)
	for _, k := range slices.Sorted(maps.Keys(all)) {
		tags = append(tags, smtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(all[k])})
	}
	out, err := p.sageMaker(o.Region).CreateTrainingPlan(ctx, &sagemaker.CreateTrainingPlanInput{
		TrainingPlanName: awssdk.String(name), TrainingPlanOfferingId: awssdk.String(o.ID), Tags: tags}, noRetrySM)
	if err != nil {
		return domain.Booking{}, explain(fmt.Errorf("aws: create training plan %s from %s in %s: %w", name, o.ID, o.Region, err))
	}
	arn := awssdk.ToString(out.TrainingPlanArn)
	if arn == "" {
		return domain.Booking{}, fmt.Errorf("aws: create training plan %s in %s: the answer names no plan; check with FindBooking", name, o.Region)
	}
	b := offered(o, false, "")
	b.ProviderRef = arn
	b.State, _ = planState(smtypes.TrainingPlanStatusPending, o.Start, o.End, p.opt.Now())
	if d, err := p.describePlan(ctx, o.Region, name); err == nil && d != nil {
		b.State, b.Message = d.State, d.Message
	}
	b.Message = "purchased " + arn + b.Message
	return b, nil
}

// describePlan reads a plan by name; nil, nil on ResourceNotFound.
func (p *Provider) describePlan(ctx context.Context, region, name string) (*domain.Booking, error) {
	d, err := p.sageMaker(region).DescribeTrainingPlan(ctx, &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: awssdk.String(name)})
	var nf *smtypes.ResourceNotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, explain(err)
	}
	b := p.planBooking(region, smtypes.TrainingPlanSummary{Status: d.Status, TrainingPlanArn: d.TrainingPlanArn, TrainingPlanName: d.TrainingPlanName,
		StartTime: d.StartTime, EndTime: d.EndTime, TotalInstanceCount: d.TotalInstanceCount, ReservedCapacitySummaries: d.ReservedCapacitySummaries,
		StatusMessage: d.StatusMessage})
	return &b, nil
}

func (p *Provider) planBooking(region string, s smtypes.TrainingPlanSummary) domain.Booking {
	start, end := awssdk.ToTime(s.StartTime).UTC(), awssdk.ToTime(s.EndTime).UTC()
	b := domain.Booking{ProviderRef: awssdk.ToString(s.TrainingPlanArn), Provider: Name, Region: region,
		InstanceCount: int(awssdk.ToInt32(s.TotalInstanceCount)), Start: start, End: end}
	if len(s.ReservedCapacitySummaries) > 0 {
		// The first segment: where the plan starts.
		rc := slices.MinFunc(s.ReservedCapacitySummaries, func(a, b smtypes.ReservedCapacitySummary) int {
			return awssdk.ToTime(a.StartTime).Compare(awssdk.ToTime(b.StartTime))
		})
		b.InstanceType, b.Zone = strings.TrimPrefix(string(rc.InstanceType), "ml."), awssdk.ToString(rc.AvailabilityZone)
		if b.InstanceCount == 0 {
			b.InstanceCount = int(awssdk.ToInt32(rc.TotalInstanceCount))
		}
	}
	var note string
	b.State, note = planState(s.Status, start, end, p.opt.Now())
	if msg := awssdk.ToString(s.StatusMessage); msg != "" {
		note = strings.TrimPrefix(note+"; SageMaker says: "+msg, "; ")
	}
	if note != "" {
		b.Message = " (" + note + ")"
	}
	return b
}

// planStates are TrainingPlanStatus (API_TrainingPlanSummary) values:
// Pending is held, so scheduled or active by the dates, noted.
var planStates = map[smtypes.TrainingPlanStatus]stateNote{
	smtypes.TrainingPlanStatusPending:   {"", "SageMaker is still reserving it (Pending)"},
	smtypes.TrainingPlanStatusScheduled: {"scheduled", ""},
	smtypes.TrainingPlanStatusActive:    {"active", ""},
	smtypes.TrainingPlanStatusExpired:   {"ended", ""},
	smtypes.TrainingPlanStatusFailed:    {"failed", "SageMaker reports the plan failed"},
}

func planState(s smtypes.TrainingPlanStatus, start, end, now time.Time) (state, note string) {
	return cloudState(planStates, "SageMaker status", s, start, end, now)
}

// findTrainingPlan settles a lost CreateTrainingPlan: the plan named after
// req.Ref, else one of the offering's terms tagged with it and no other row.
func (p *Provider) findTrainingPlan(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	o := req.Offering
	if o.Region == "" {
		return nil, fmt.Errorf("aws: find training plan: the offering has no region")
	}
	name := ""
	if req.Ref != "" {
		name = planName(req.Ref)
	}
	c := p.sageMaker(o.Region)
	for page, err := range pages(ctx, sagemaker.NewListTrainingPlansPaginator(c, &sagemaker.ListTrainingPlansInput{})) {
		if err != nil {
			return nil, explain(fmt.Errorf("aws: list training plans in %s: %w", o.Region, err))
		}
		for _, s := range page.TrainingPlanSummaries {
			if name != "" && awssdk.ToString(s.TrainingPlanName) == name {
				return p.found(o, s), nil
			}
			if !awssdk.ToTime(s.StartTime).Equal(o.Start) || !awssdk.ToTime(s.EndTime).Equal(o.End) || int(awssdk.ToInt32(s.TotalInstanceCount)) != o.InstanceCount {
				continue
			}
			tags, err := c.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: s.TrainingPlanArn})
			if err != nil {
				return nil, explain(fmt.Errorf("aws: tags of training plan %s: %w", awssdk.ToString(s.TrainingPlanName), err))
			}
			kv := map[string]string{}
			for _, t := range tags.Tags {
				kv[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
			}
			if ref := kv[domain.TagRef]; kv[domain.TagOffering] == o.ID && (ref == "" || ref == req.Ref) {
				return p.found(o, s), nil
			}
		}
	}
	return nil, nil
}

func (p *Provider) found(o domain.Offering, s smtypes.TrainingPlanSummary) *domain.Booking {
	b := p.planBooking(o.Region, s)
	b.CostUSD = o.UpfrontUSD
	if b.InstanceType == "" {
		b.InstanceType, b.Zone = o.InstanceType, o.Zone
	}
	b.Message = "found " + b.ProviderRef + b.Message
	return &b
}

// refreshTrainingPlan searches again as found for the same id; ErrOfferingGone if gone.
func (p *Provider) refreshTrainingPlan(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	if o.ID == "" || o.Region == "" || o.InstanceType == "" {
		return o, specErrorf("aws: training plan offering %q has no id, region or instance type", o.ID)
	}
	from := domain.Later(o.Start.Add(-24*time.Hour), p.opt.Now())
	held := time.Duration(math.Round(o.HeldHours())) * time.Hour
	q := domain.OfferingQuery{GPU: o.GPU.Model, Instances: o.InstanceCount, Duration: held, StartAfter: from, StartBefore: o.Start.Add(time.Hour),
		FlexDuration: time.Hour}
	target := smtypes.SageMakerResourceName(o.TargetResource)
	if target == "" {
		target = smtypes.SageMakerResourceNameTrainingJob
	}
	got, err := p.searchPlans(ctx, o.Region, domain.CatalogEntry{InstanceType: o.InstanceType, GPU: o.GPU}, o.InstanceCount, target, q)
	if err != nil {
		return o, fmt.Errorf("aws: describe training plan offering %s again: %w", o.ID, err)
	}
	for _, c := range got {
		if c.ID == o.ID {
			c.FlexLength = o.FlexLength
			return c, nil
		}
	}
	return o, fmt.Errorf("aws: training plan offering %s in %s (%d × %s from %s): %w", o.ID, o.Region, o.InstanceCount, o.InstanceType,
		o.Start.UTC().Format(time.RFC3339), domain.ErrOfferingGone)
}

// planUsage reports a plan's instances in use now (InUseInstanceCount); SageMaker runs them, so no EC2 metric.
func (p *Provider) planUsage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	arn := q.ProviderRef
	name := arn[strings.LastIndex(arn, "/")+1:]
	d, err := p.sageMaker(q.Region).DescribeTrainingPlan(ctx, &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: awssdk.String(name)})
	if err != nil {
		return domain.UsageReport{}, explain(fmt.Errorf("aws: usage of training plan %s: %w", name, err))
	}
	rep := domain.UsageReport{Source: "SageMaker DescribeTrainingPlan in-use instance count (no GPU utilization)",
		Note: "a training plan's instances are SageMaker's: running is its in-use count now; busy is not measured", InterruptionsUnknown: true}
	now := p.opt.Now()
	var seg *smtypes.ReservedCapacitySummary
	for i, rc := range d.ReservedCapacitySummaries {
		if !now.Before(awssdk.ToTime(rc.StartTime)) && now.Before(awssdk.ToTime(rc.EndTime)) {
			seg = &d.ReservedCapacitySummaries[i]
		}
	}
	if seg == nil {
		return rep, nil
	}
	for i := 0; i < int(awssdk.ToInt32(d.InUseInstanceCount)); i++ {
		rep.Instances = append(rep.Instances, domain.InstanceUsage{ID: fmt.Sprintf("%s/%d", name, i),
			InstanceType: strings.TrimPrefix(string(seg.InstanceType), "ml."), Zone: awssdk.ToString(seg.AvailabilityZone),
			Start: awssdk.ToTime(seg.StartTime).UTC(), EndLastSeen: true, End: now})
	}
	return rep, nil
}
