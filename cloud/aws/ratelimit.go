package aws

import (
	"context"
	"sync"
	"time"
)

// The fetch keeps a copy of AWS's per-region token buckets so it never sends
// faster than AWS accepts: 100 tokens refilled at 20/s per non-mutating EC2
// action (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html),
// 10 at 5/s for GetProducts (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-pelong.html).

type apiLimit struct {
	capacity, refill float64
}

var (
	nonMutatingLimit = apiLimit{100, 20}
	priceListLimit   = apiLimit{10, 5}
)

// headroom: evenly sent requests arrive bunched, so run a little below AWS's rate.
const headroom = 0.9

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

// wait takes a token, sleeping for a refill, or returns the context's error.
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

// bucket returns an action's bucket in a region; nil when Unthrottled.
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
