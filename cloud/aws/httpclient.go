package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// plainBodyClient hides the body's io.WriterTo from net/http: smithy-go's WriteTo
// answers (0, io.EOF) once the SDK closed the body, and net/http's extra-bytes
// check would then tear down the connection mid-answer. Through Read it is EOF.
type plainBodyClient struct{ inner awssdk.HTTPClient }

// Do sends the request with its body behind a plain io.ReadCloser.
func (c plainBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = plainBody{req.Body}
	}
	return c.inner.Do(req)
}

type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }

func withPlainBodies(c awssdk.HTTPClient) awssdk.HTTPClient {
	if c == nil {
		c = awshttp.NewBuildableClient()
	}
	if _, ok := c.(plainBodyClient); ok {
		return c
	}
	return plainBodyClient{inner: c}
}

// Connection limits: an unreachable endpoint is reported within seconds, not
// after the SDK's defaults retried (40 s and more for a closed port).
const (
	dialTimeout = 3 * time.Second
	tlsTimeout  = 4 * time.Second
	// idleConnsPerHost keeps a connection per stream when regions share one host (a proxy, a local endpoint).
	idleConnsPerHost = 64
)

// withTimeouts applies the limits to the SDK's default client only.
func withTimeouts(c awssdk.HTTPClient) awssdk.HTTPClient {
	if c == nil {
		c = awshttp.NewBuildableClient()
	}
	bc, ok := c.(*awshttp.BuildableClient)
	if !ok {
		return c
	}
	return bc.WithDialerOptions(func(d *net.Dialer) { d.Timeout = dialTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = tlsTimeout
			t.MaxIdleConnsPerHost = idleConnsPerHost
		})
}

// unreachableCause says why a request never reached the endpoint, or false.
// Never sent, so reported at once: the next poll tries again.
func unreachableCause(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		var dns *net.DNSError
		switch {
		case errors.As(err, &dns) && dns.IsNotFound:
			return "no such host " + dns.Name, true
		case errors.As(err, &dns):
			return "cannot resolve " + dns.Name + ": " + dns.Err, true
		case errors.Is(err, syscall.ECONNREFUSED):
			return "connection refused", true
		case op.Timeout():
			return fmt.Sprintf("no connection within %s", dialTimeout), true
		}
		return op.Err.Error(), true
	}
	if strings.Contains(err.Error(), "TLS handshake timeout") {
		return fmt.Sprintf("no TLS handshake within %s", tlsTimeout), true
	}
	return "", false
}

// attemptError is an attempt that got no answer; it is not retried.
type attemptError struct {
	endpoint, cause string
	err             error
}

func (e *attemptError) Error() string {
	if e.endpoint == "" {
		return e.cause
	}
	return e.endpoint + ": " + e.cause
}
func (e *attemptError) Unwrap() error        { return e.err }
func (e *attemptError) RetryableError() bool { return false }

// attemptGuard wraps each attempt of a market data call: a token from the
// action's bucket, a timeout, and the endpoint and cause when no answer came.
type attemptGuard struct {
	timeout time.Duration
	bucket  *tokenBucket
}

// ID names the middleware in the SDK's stack.
func (attemptGuard) ID() string { return "gpumarket.AttemptGuard" }

func (g attemptGuard) addTo(s *middleware.Stack) error {
	return s.Finalize.Insert(g, "Retry", middleware.After)
}

// HandleFinalize runs one attempt.
func (g attemptGuard) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error) {
	if g.bucket != nil {
		if err := g.bucket.wait(ctx); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if g.timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, g.timeout)
	}
	defer cancel()
	out, md, err := next.HandleFinalize(actx, in)
	if err == nil || ctx.Err() != nil {
		return out, md, err
	}
	endpoint := ""
	if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil {
		endpoint = req.URL.Scheme + "://" + req.URL.Host
	}
	if actx.Err() != nil {
		return out, md, &attemptError{endpoint: endpoint, cause: fmt.Sprintf("no answer within %s", g.timeout), err: err}
	}
	if cause, ok := unreachableCause(err); ok {
		return out, md, &attemptError{endpoint: endpoint, cause: "cannot reach it: " + cause, err: err}
	}
	return out, md, err
}

// ec2Call is a market data call's option: the attempt guard with the action's bucket.
func (p *Provider) ec2Call(region, action string) func(*ec2.Options) {
	g := attemptGuard{timeout: p.opt.AttemptTimeout, bucket: p.bucket(region, action, nonMutatingLimit)}
	return func(o *ec2.Options) { o.APIOptions = append(o.APIOptions, g.addTo) }
}

func (p *Provider) pricingCall() func(*pricing.Options) {
	g := attemptGuard{timeout: p.opt.AttemptTimeout, bucket: p.bucket(pricingRegion, "GetProducts", priceListLimit)}
	return func(o *pricing.Options) { o.APIOptions = append(o.APIOptions, g.addTo) }
}

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
