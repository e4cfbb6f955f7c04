package aws

import (
	"context"
	"sync"
	"time"
)

// AWS throttles each account's API calls per region with token buckets
// ("Request throttling for the Amazon EC2 API", "Request token bucket sizes
// and refill rates",
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html):
// every non-mutating EC2 action (DescribeSpotPriceHistory,
// DescribeInstanceTypes, DescribeRegions, GetSpotPlacementScores) has its
// own bucket of 100 tokens refilled at 20 a second, per region. The Price
// List Query API's GetProducts has 10 refilled at 5 a second per account
// and endpoint region ("Quotas",
// https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-pelong.html).
// The fetch fans out to every region at once and keeps its own copy of
// those buckets, so it never sends faster than AWS accepts; what other
// callers in the account take shows up as RequestLimitExceeded, which the
// retryer backs off from.

// apiLimit is a documented bucket: its size and refill per second.
type apiLimit struct {
	capacity, refill float64
}

var (
	nonMutatingLimit = apiLimit{100, 20}
	priceListLimit   = apiLimit{10, 5}
)

// headroom is the share of a documented bucket the fetch uses: requests
// that leave evenly can arrive bunched (the network's jitter), and AWS
// counts them as they arrive, so the copy runs a little below AWS's rate.
const headroom = 0.9

// tokenBucket is a client-side copy of an AWS token bucket.
type tokenBucket struct {
	lim apiLimit

	mu     sync.Mutex
	tokens float64
	at     time.Time
}

func newTokenBucket(lim apiLimit) *tokenBucket {
	lim = apiLimit{capacity: lim.capacity * headroom, refill: lim.refill * headroom}
	return &tokenBucket{lim: lim, tokens: lim.capacity}
}

// wait takes a token, sleeping until one is refilled when the bucket is
// empty, or returns the context's error.
func (b *tokenBucket) wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		now := time.Now()
		if !b.at.IsZero() {
			b.tokens = min(b.lim.capacity, b.tokens+now.Sub(b.at).Seconds()*b.lim.refill)
		}
		b.at = now
		if b.tokens >= 1 {
			b.tokens--
			b.mu.Unlock()
			return nil
		}
		need := time.Duration((1 - b.tokens) / b.lim.refill * float64(time.Second))
		b.mu.Unlock()
		t := time.NewTimer(need)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

type bucketKey struct{ region, action string }

// bucket returns the provider's bucket for an action in a region (nil, no
// limit, when Options.Unthrottled).
func (p *Provider) bucket(region, action string, lim apiLimit) *tokenBucket {
	if p.opt.Unthrottled {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buckets == nil {
		p.buckets = map[bucketKey]*tokenBucket{}
	}
	k := bucketKey{region, action}
	b := p.buckets[k]
	if b == nil {
		b = newTokenBucket(lim)
		p.buckets[k] = b
	}
	return b
}
