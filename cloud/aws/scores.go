package aws

import (
	"context"
	"sort"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

// scoreTTL is how long placement scores are kept: AWS limits how many
// distinct score requests an account may make a day.
const scoreTTL = 6 * time.Hour

// maxScoreTypes caps the instance types scored per refresh, for the same
// quota; the newest GPU models go first.
const maxScoreTypes = 10

type scoreState struct {
	denied bool
	at     time.Time
}

// scoreJob asks GetSpotPlacementScores beside the regions' history. It
// needs each region's instance types (to score the types the regions
// actually offer), so it starts when every region has said them, one round
// trip into a cold fetch, and is done a round trip later, while the
// regions still page through their history.
type scoreJob struct {
	q     domain.Query
	mu    sync.Mutex
	types map[string]string // instance type → GPU model, of every region
	left  int               // regions yet to say their types
	ready chan struct{}     // closed when left reaches 0
	done  chan struct{}
	// scores[region][zone id][type], once done.
	scores map[string]map[string]map[string]int
}

// startScores returns the fetch's score job, or nil when scores are not to
// be asked: the caller may not (UnauthorizedOperation earlier), or they
// were asked within scoreTTL (AWS limits how many distinct score requests an
// account may make a day).
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

// typesKnown records a region's GPU types (nil when they could not be
// had); every region calls it once.
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

// wait returns the scores once asked, or nil when ctx ends first.
func (j *scoreJob) wait(ctx context.Context) map[string]map[string]map[string]int {
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

// askScores asks GetSpotPlacementScores, once per instance type for all the
// regions (at most maxScoreTypes, the newest GPU models first, all at
// once), for a score per zone. When the caller may not call it
// (UnauthorizedOperation) the scores stay nil and it is not asked again.
func (p *Provider) askScores(ctx context.Context, regions []string, seen map[string]string, now time.Time) map[string]map[string]map[string]int {
	rank := map[string]int{}
	for i, m := range domain.GPUModels {
		rank[m] = i
	}
	types := make([]string, 0, len(seen))
	for t := range seen {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if rank[seen[types[i]]] != rank[seen[types[j]]] {
			return rank[seen[types[i]]] < rank[seen[types[j]]]
		}
		return types[i] < types[j]
	})
	if len(types) > maxScoreTypes {
		types = types[:maxScoreTypes]
	}
	if len(types) == 0 {
		return nil
	}
	type answer struct {
		typ    string
		scores []ec2types.SpotPlacementScore
		err    error
	}
	answers := make(chan answer, len(types))
	call := p.ec2Call(p.home, "GetSpotPlacementScores")
	for _, t := range types {
		go func() {
			pg := ec2.NewGetSpotPlacementScoresPaginator(p.client(p.home), &ec2.GetSpotPlacementScoresInput{
				InstanceTypes:          []string{t},
				RegionNames:            regions,
				TargetCapacity:         awssdk.Int32(1),
				SingleAvailabilityZone: awssdk.Bool(true),
				MaxResults:             awssdk.Int32(100),
			})
			var all []ec2types.SpotPlacementScore
			for pg.HasMorePages() {
				out, err := pg.NextPage(ctx, call)
				if err != nil {
					answers <- answer{t, nil, err}
					return
				}
				all = append(all, out.SpotPlacementScores...)
			}
			answers <- answer{t, all, nil}
		}()
	}
	// scores[region][zone id][type]
	scores := map[string]map[string]map[string]int{}
	var denied, failed error
	for range types {
		a := <-answers
		if a.err != nil {
			if apiCode(a.err) == "UnauthorizedOperation" {
				denied = a.err
			} else if failed == nil {
				failed = a.err
			}
			continue
		}
		for _, s := range a.scores {
			if s.Region == nil || s.AvailabilityZoneId == nil || s.Score == nil {
				continue
			}
			r, z := *s.Region, *s.AvailabilityZoneId
			if scores[r] == nil {
				scores[r] = map[string]map[string]int{}
			}
			if scores[r][z] == nil {
				scores[r][z] = map[string]int{}
			}
			scores[r][z][a.typ] = int(*s.Score)
		}
	}
	switch {
	case denied != nil:
		p.opt.Logger.Info("spot placement scores not allowed for these credentials; scores stay unknown", "err", denied)
		p.mu.Lock()
		p.scores.denied = true
		p.mu.Unlock()
		return nil
	case failed != nil:
		// Scores are optional: the pools show none, and the next
		// back-fill asks again.
		p.opt.Logger.Info("spot placement scores", "err", failed)
		return scores
	}
	p.mu.Lock()
	p.scores.at = now
	p.mu.Unlock()
	return scores
}
