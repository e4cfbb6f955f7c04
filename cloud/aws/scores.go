package aws

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/gpumarket/gpumarket/domain"
)

// scoreTTL: AWS limits distinct score requests an account makes a day.
const scoreTTL = 6 * time.Hour

// maxScoreTypes caps the types scored per refresh, newest GPUs first, for the same quota.
const maxScoreTypes = 10

type scoreState struct {
	denied bool
	at     time.Time
}

// scoreJob asks GetSpotPlacementScores beside the history once every region has
// said its types, a round trip into a cold fetch.
type scoreJob struct {
	q      domain.Query
	mu     sync.Mutex
	types  map[string]string // instance type → GPU model, of every region
	left   int               // regions yet to say their types
	ready  chan struct{}     // closed when left reaches 0
	done   chan struct{}
	scores *placement
}

// placement is what GetSpotPlacementScores said of a fleet's set of types: a
// score per region and zone id, and why a zone has none.
type placement struct {
	types  map[string]bool
	byZone map[string]map[string]int // region → zone id → score of the set
	// note: why no type has a score (too few to ask).
	note string
}

// Notes said of a pool instead of a placement score.
const (
	NoteTooFewTypes = "too few types for a meaningful score"
	NoteNotInTop10  = "not in AWS's top 10"
)

// of is a pool's score or its note; false for a type not asked.
func (pl *placement) of(region, zoneID, typ string) (score *int, note string, ok bool) {
	if pl == nil || !pl.types[typ] {
		return nil, "", false
	}
	if pl.note != "" {
		return nil, pl.note, true
	}
	if v, found := pl.byZone[region][zoneID]; found {
		return domain.Int(v), "", true
	}
	return nil, NoteNotInTop10, true
}

// startScores returns the fetch's score job, nil when the caller may not
// (UnauthorizedOperation) or scores were asked within scoreTTL.
func (p *Provider) startScores(ctx context.Context, regions []string, q domain.Query) *scoreJob {
	now := p.opt.Now()
	p.mu.Lock()
	st := p.scores
	p.mu.Unlock()
	if len(regions) == 0 || st.denied || (!st.at.IsZero() && now.Sub(st.at) < scoreTTL) {
		return nil
	}
	j := &scoreJob{q: q, types: map[string]string{}, left: len(regions), ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(j.done)
		select {
		case <-j.ready:
		case <-ctx.Done():
			return
		}
		j.mu.Lock()
		types := j.types
		j.mu.Unlock()
		j.scores = p.askScores(ctx, regions, types, now)
	}()
	return j
}

// typesKnown records a region's GPU types (nil if unknown); each region calls it once.
func (j *scoreJob) typesKnown(types []GPUType) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, t := range types {
		if j.q.WantsGPU(t.GPU.Model) {
			j.types[t.InstanceType] = t.GPU.Model
		}
	}
	if j.left--; j.left == 0 {
		close(j.ready)
	}
}

func (j *scoreJob) wait(ctx context.Context) *placement {
	if j == nil {
		return nil
	}
	select {
	case <-j.done:
		return j.scores
	case <-ctx.Done():
		return nil
	}
}

// minScoreTypes: "If you specify one or two instance types … the returned
// placement score will always be low" (GetSpotPlacementScoresInput.InstanceTypes).
const minScoreTypes = 3

// askScores asks once for the fleet's set of types (at most maxScoreTypes),
// a score per zone; AWS answers for its top 10 zones only. Not asked below
// minScoreTypes, nor again after UnauthorizedOperation.
func (p *Provider) askScores(ctx context.Context, regions []string, seen map[string]string, now time.Time) *placement {
	rank := map[string]int{}
	for i, m := range domain.GPUModels {
		rank[m] = i
	}
	types := slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		return cmp.Or(cmp.Compare(rank[seen[a]], rank[seen[b]]), strings.Compare(a, b))
	})
	if len(types) > maxScoreTypes {
		types = types[:maxScoreTypes]
	}
	if len(types) == 0 {
		return nil
	}
	pl := &placement{types: map[string]bool{}, byZone: map[string]map[string]int{}}
	for _, t := range types {
		pl.types[t] = true
	}
	if len(types) < minScoreTypes {
		pl.note = NoteTooFewTypes
		return pl
	}
	pg := ec2.NewGetSpotPlacementScoresPaginator(p.client(p.home), &ec2.GetSpotPlacementScoresInput{
		InstanceTypes:          types,
		RegionNames:            regions,
		TargetCapacity:         awssdk.Int32(1),
		SingleAvailabilityZone: awssdk.Bool(true),
		MaxResults:             awssdk.Int32(100),
	})
	for out, err := range pages(ctx, pg, p.ec2Call(p.home, "GetSpotPlacementScores")) {
		if apiCode(err) == "UnauthorizedOperation" {
			p.opt.Logger.Info("spot placement scores not allowed for these credentials; scores stay unknown", "err", err)
			p.mu.Lock()
			p.scores.denied = true
			p.mu.Unlock()
			return nil
		}
		if err != nil {
			// Optional: the pools show none, the next back-fill asks again.
			p.opt.Logger.Info("spot placement scores", "err", err)
			return nil
		}
		for _, s := range out.SpotPlacementScores {
			if s.Region == nil || s.AvailabilityZoneId == nil || s.Score == nil {
				continue
			}
			if pl.byZone[*s.Region] == nil {
				pl.byZone[*s.Region] = map[string]int{}
			}
			pl.byZone[*s.Region][*s.AvailabilityZoneId] = int(*s.Score)
		}
	}
	p.mu.Lock()
	p.scores.at = now
	p.mu.Unlock()
	return pl
}
