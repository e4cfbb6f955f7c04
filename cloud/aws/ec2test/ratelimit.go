package ec2test

import (
	"strings"
	"time"
)

// EC2 throttles each account's requests per region and per API with a token
// bucket ("Request throttling for the Amazon EC2 API",
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html,
// "Request token bucket sizes and refill rates"): a bucket holds up to its
// capacity, each request takes a token, and the bucket refills at a set
// rate per second. Non-mutating actions (Describe*, Get*) have 100 tokens
// refilled at 20 a second; mutating actions 50 at 5; a few actions have
// their own, among them DescribeCapacityBlockOfferings and
// PurchaseCapacityBlock (10 at 0.15). The Price List Query API throttles
// GetProducts with a bucket of 10 refilled at 5 a second per account and
// Region ("Quotas" in
// https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-pelong.html).
// With EnforceRateLimits the fake keeps those buckets and answers
// RequestLimitExceeded when one is empty, so a client that fans out faster
// than AWS allows is caught by a test.

// RateLimit is a token bucket's size and refill rate per second.
type RateLimit struct {
	Capacity float64
	Refill   float64
}

// DocumentedRateLimit returns AWS's documented bucket for an action
// ("pricing:GetProducts" for the Price List).
func DocumentedRateLimit(action string) RateLimit {
	switch action {
	case "DescribeCapacityBlockOfferings", "PurchaseCapacityBlock":
		return RateLimit{10, 0.15}
	case "pricing:GetProducts":
		return RateLimit{10, 5}
	}
	if strings.HasPrefix(action, "Describe") || strings.HasPrefix(action, "Get") || strings.HasPrefix(action, "List") {
		return RateLimit{100, 20}
	}
	return RateLimit{50, 5}
}

type bucketKey struct{ region, action string }

type bucket struct {
	tokens float64
	at     time.Time
}

// take spends a token of the region's bucket for the action, reporting
// false when it is empty. Buckets run on the wall clock (not Server.Now,
// which tests fix), as AWS's do. The caller holds s.mu.
func (s *Server) take(action, region string) bool {
	lim := DocumentedRateLimit(action)
	if s.buckets == nil {
		s.buckets = map[bucketKey]*bucket{}
	}
	k := bucketKey{region, action}
	now := time.Now()
	b := s.buckets[k]
	if b == nil {
		b = &bucket{tokens: lim.Capacity, at: now}
		s.buckets[k] = b
	}
	b.tokens += now.Sub(b.at).Seconds() * lim.Refill
	if b.tokens > lim.Capacity {
		b.tokens = lim.Capacity
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
