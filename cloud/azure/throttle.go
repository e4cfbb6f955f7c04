package azure

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/gpumarket/gpumarket/domain"
)

// Every region is fetched at once; each API's documented limit bounds the calls:
// ARM buckets per subscription and principal, reads 250 (25/s), writes 200 (10/s)
// (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling);
// Resource Graph "at most 15 queries within every 5-second window"
// (https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests);
// Retail Prices documents none, so DefaultPricesInFlight and its Retry-After.
const (
	armReadBucket, armReadRefill     = 250, 25
	armWriteBucket, armWriteRefill   = 200, 10
	armDeleteBucket, armDeleteRefill = 200, 10
	graphBucket                      = 15
	graphWindow                      = 5 * time.Second
	// DefaultPricesInFlight bounds the Retail Prices requests in flight.
	DefaultPricesInFlight = 16
	// dialTimeout: an unreachable endpoint is said within seconds.
	dialTimeout = 5 * time.Second
)

// bucket is a token bucket; a server's quota reset (pauseUntil) holds every caller.
type bucket struct {
	mu         sync.Mutex
	size, rate float64
	tokens     float64
	last       time.Time
	pauseUntil time.Time
	clock      func() time.Time
	sleep      func(context.Context, time.Duration) error
}

func newBucket(size int, perSecond float64) *bucket {
	return &bucket{size: float64(size), rate: perSecond, tokens: float64(size), clock: time.Now, sleep: domain.Sleep}
}

func (b *bucket) wait(ctx context.Context) error {
	for {
		d := b.take()
		if d <= 0 {
			return nil
		}
		if err := b.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// take takes a token and returns 0, or returns how long to wait for one.
func (b *bucket) take() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	if now.Before(b.pauseUntil) {
		return b.pauseUntil.Sub(now)
	}
	if !b.last.IsZero() {
		b.tokens = min(b.size, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return max(time.Duration((1-b.tokens)/b.rate*float64(time.Second)), time.Millisecond)
}

// pause holds and empties the bucket for d: the server's count is the truth.
func (b *bucket) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	until := b.clock().Add(min(d, maxRetryWait))
	if until.After(b.pauseUntil) {
		b.pauseUntil = until
	}
	b.tokens = 0
	b.last = until
}

// limits are the buckets of one subscription and principal.
type limits struct {
	reads, writes, deletes, graph *bucket
	prices                        chan struct{}
}

func newLimits(pricesInFlight int) *limits {
	return &limits{
		reads:   newBucket(armReadBucket, armReadRefill),
		writes:  newBucket(armWriteBucket, armWriteRefill),
		deletes: newBucket(armDeleteBucket, armDeleteRefill),
		graph:   newBucket(graphBucket, float64(graphBucket)/graphWindow.Seconds()),
		prices:  make(chan struct{}, pricesInFlight),
	}
}

func (l *limits) acquirePrices(ctx context.Context) (release func(), err error) {
	select {
	case l.prices <- struct{}{}:
		return func() { <-l.prices }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func isGraph(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSuffix(r.URL.Path, "/"), "/providers/Microsoft.ResourceGraph/resources")
}

func (l *limits) bucketOf(r *http.Request) *bucket {
	switch {
	case isGraph(r):
		return l.graph
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return l.reads
	case r.Method == http.MethodDelete:
		return l.deletes
	}
	return l.writes
}

// throttlePolicy, per retry: each attempt takes a token, and a server's word on
// its quota (429 Retry-After, Graph's quota headers) holds the bucket.
type throttlePolicy struct{ l *limits }

// Do implements policy.Policy.
func (t throttlePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	b := t.l.bucketOf(raw)
	if err := b.wait(raw.Context()); err != nil {
		return nil, err
	}
	resp, err := req.Next()
	if err != nil || resp == nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if d, ok := domain.RetryAfter(resp.Header.Get("Retry-After"), time.Now(), maxRetryWait); ok {
			b.pause(d)
		}
	}
	if isGraph(raw) {
		if left, err := strconv.Atoi(resp.Header.Get("x-ms-user-quota-remaining")); err == nil && left <= 0 {
			if d, ok := parseHMS(resp.Header.Get("x-ms-user-quota-resets-after")); ok {
				b.pause(d)
			}
		}
	}
	return resp, nil
}

func parseHMS(s string) (time.Duration, bool) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		n, err := strconv.ParseFloat(parts[i], 64)
		if err != nil || n < 0 {
			return 0, false
		}
		d += time.Duration(n * float64(unit))
	}
	return d, true
}

// dialFailure reports whether the request never left: refused, unresolved,
// unreached. Said at once; a retry would meet the same closed port.
func dialFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// retryStatus are azcore's own retried statuses.
var retryStatus = map[int]bool{
	http.StatusRequestTimeout: true, http.StatusTooManyRequests: true, http.StatusInternalServerError: true,
	http.StatusBadGateway: true, http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true,
}

// shouldRetry is azcore's rule, less connections that never opened.
func shouldRetry(resp *http.Response, err error) bool {
	if err != nil {
		return !dialFailure(err)
	}
	return resp != nil && retryStatus[resp.StatusCode]
}

// newTransport is the default transport with a short dial timeout.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	return t
}
