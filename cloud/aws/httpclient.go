package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// plainBodyClient hides the request body's io.WriterTo from net/http.
//
// Why: smithy-go wraps the body in a reader whose WriteTo answers
// (0, io.EOF) once the SDK has closed it, and the SDK closes it as soon as
// the response headers arrive. net/http, after sending Content-Length
// bytes, copies the body once more to check for extra bytes; when that
// copy comes after the close (a fast endpoint, a large answer), io.Copy
// reports the io.EOF as an error, the transport tears the connection down,
// and the answer being read fails with "use of closed network connection"
// — about one large DescribeSpotPriceHistory page in six against a
// loopback endpoint, each costing a retry with backoff, or a failed
// PurchaseCapacityBlock, which is never retried. Through Read, a closed
// body is a clean end of file.
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

// Connection limits. An endpoint that refuses connections, cannot be
// resolved or never completes a handshake is reported within seconds, not
// after the SDK's defaults (30s to connect, 10s for TLS, each retried five
// times with backoff: 40s and more for a closed port).
const (
	dialTimeout = 3 * time.Second
	tlsTimeout  = 4 * time.Second
	// idleConnsPerHost keeps a connection per stream when many regions
	// share one host (AWS_ENDPOINT_URL pointing at a proxy or a local
	// endpoint); AWS's own endpoints are one host per region.
	idleConnsPerHost = 64
)

// withTimeouts applies the connection limits to the SDK's default client;
// a client the caller built (tests, a custom Config) is left as it is.
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

// unreachableCause says why a request never reached the endpoint (refused,
// not resolved, no connection in time, no TLS handshake in time), or
// reports false for any other error. Such a request was never sent, so it
// is safe to report at once rather than retry: the next poll tries again.
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

// attemptError is an attempt that got no answer: the endpoint was out of
// reach, or did not answer within the attempt timeout. It is not retried.
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

// attemptGuard wraps each attempt (it runs after the retry middleware) of a
// market data call: it takes a token from the action's bucket first, bounds
// the attempt with a timeout (an endpoint that accepts and never answers
// fails the region after AttemptTimeout instead of holding the fetch), and
// names the endpoint and the cause when no answer came.
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

// ec2Call returns the per-call option of a market data call to EC2: the
// attempt guard with the region's bucket for the action.
func (p *Provider) ec2Call(region, action string) func(*ec2.Options) {
	g := attemptGuard{timeout: p.opt.AttemptTimeout, bucket: p.bucket(region, action, nonMutatingLimit)}
	return func(o *ec2.Options) { o.APIOptions = append(o.APIOptions, g.addTo) }
}

// pricingCall is ec2Call for the Price List's GetProducts.
func (p *Provider) pricingCall() func(*pricing.Options) {
	g := attemptGuard{timeout: p.opt.AttemptTimeout, bucket: p.bucket(pricingRegion, "GetProducts", priceListLimit)}
	return func(o *pricing.Options) { o.APIOptions = append(o.APIOptions, g.addTo) }
}
