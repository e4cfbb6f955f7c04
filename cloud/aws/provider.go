// Package aws is the AWS market source on aws-sdk-go-v2: spot history, GPU
// types, advisor buckets, placement scores, on-demand prices, capacity blocks
// and fleets. Only cmd imports it: service/ec2 is very large.
package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/gpumarket/gpumarket/cloud/aws/awserr"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// Name is the provider's name.
const Name = "aws"

// ErrNoCredentials wraps New's error when no usable credentials are found. It
// matches domain.ErrDeclined: a refusal for credentials bought nothing.
var ErrNoCredentials = domain.MarkDeclined(errors.New("aws: no credentials"))

// Options configure the provider. Zero values mean the defaults.
type Options struct {
	// Regions when a query names none; with neither, DescribeRegions.
	Regions []string
	// Profile is the shared-config profile (AWS_PROFILE otherwise).
	Profile string
	// AdvisorURL is the Spot Instance Advisor JSON; "" uses the embedded snapshot.
	AdvisorURL string
	// LaunchTemplate ("lt-…" or a name) for a FleetSpec naming none.
	LaunchTemplate string
	// DataDir holds the day-long caches; "" caches in memory only.
	DataDir string
	Now     func() time.Time
	Logger  *slog.Logger
	// Concurrency bounds the regions searched at once for blocks (default 4).
	Concurrency int
	// Config replaces config.LoadDefaultConfig (tests).
	Config *awssdk.Config
	// HTTPClient fetches the advisor file (default: http.DefaultClient).
	HTTPClient *http.Client
	// MaxAttempts and MaxBackoff tune the retryer (defaults 6 and 20s).
	MaxAttempts int
	MaxBackoff  time.Duration
	// Unthrottled drops the client-side token buckets: local benchmarks only.
	Unthrottled bool
	// AttemptTimeout bounds each market data attempt (default 15s).
	AttemptTimeout time.Duration
	// AdvisorTimeout bounds the live advisor fetch (default 3s).
	AdvisorTimeout time.Duration
}

// Provider is the AWS source: domain.Provider and its booking, fleet and record abilities.
type Provider struct {
	opt     Options
	cfg     awssdk.Config
	pricing pricingAPI
	home    string // region for account-wide calls

	mu       sync.Mutex
	regionsM []string // DescribeRegions, once
	state    map[string]*regionState

	clients   regional[ec2API]
	cw        regional[cloudWatchAPI] // usage.go
	sm        regional[sageMakerAPI]  // SageMaker training plans (trainingplan.go)
	adv       advisorState
	scores    scoreState
	onDemandC onDemandCache
	buckets   map[bucketKey]*tokenBucket
}

var (
	_ domain.Provider          = (*Provider)(nil)
	_ domain.OfferingFinder    = (*Provider)(nil)
	_ domain.Booker            = (*Provider)(nil)
	_ domain.FleetLauncher     = (*Provider)(nil)
	_ domain.FleetFinder       = (*Provider)(nil)
	_ domain.RecordLister      = (*Provider)(nil)
	_ domain.OfferingRefresher = (*Provider)(nil)
	_ domain.UsageReporter     = (*Provider)(nil)
)

// ec2API is the part of the EC2 client the provider uses.
type ec2API interface {
	DescribeRegions(context.Context, *ec2.DescribeRegionsInput, ...func(*ec2.Options)) (*ec2.DescribeRegionsOutput, error)
	ec2.DescribeInstanceTypesAPIClient
	ec2.DescribeSpotPriceHistoryAPIClient
	ec2.GetSpotPlacementScoresAPIClient
	ec2.DescribeCapacityBlockOfferingsAPIClient
	ec2.DescribeCapacityReservationsAPIClient
	ec2.DescribeInstancesAPIClient
	ec2.DescribeSpotInstanceRequestsAPIClient
	PurchaseCapacityBlock(context.Context, *ec2.PurchaseCapacityBlockInput, ...func(*ec2.Options)) (*ec2.PurchaseCapacityBlockOutput, error)
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeFleets(context.Context, *ec2.DescribeFleetsInput, ...func(*ec2.Options)) (*ec2.DescribeFleetsOutput, error)
	DeleteFleets(context.Context, *ec2.DeleteFleetsInput, ...func(*ec2.Options)) (*ec2.DeleteFleetsOutput, error)
	DescribeFleetInstances(context.Context, *ec2.DescribeFleetInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeFleetInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

type pricingAPI interface {
	pricing.GetProductsAPIClient
}

// New loads the AWS configuration the AWS way and checks for credentials, so a
// missing login is one clear error before any fetch.
func New(ctx context.Context, opt Options) (*Provider, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = http.DefaultClient
	}
	domain.OrDefault(&opt.Concurrency, 4)
	domain.OrDefault(&opt.MaxAttempts, 6)
	domain.OrDefault(&opt.MaxBackoff, 20*time.Second)
	domain.OrDefault(&opt.AdvisorTimeout, 3*time.Second)
	domain.OrDefault(&opt.AttemptTimeout, 15*time.Second)
	var cfg awssdk.Config
	if opt.Config != nil {
		cfg = opt.Config.Copy()
	} else {
		// The SDK's own warnings go to the debug log; New says one clear thing.
		sdkLog := logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			opt.Logger.Debug(fmt.Sprintf(format, v...), "sdk", string(c))
		})
		lo := []func(*config.LoadOptions) error{config.WithLogger(sdkLog)}
		if opt.Profile != "" {
			lo = append(lo, config.WithSharedConfigProfile(opt.Profile))
		}
		c, err := config.LoadDefaultConfig(ctx, lo...)
		if err != nil {
			return nil, explain(fmt.Errorf("aws: load configuration: %w", err))
		}
		cfg = c
	}
	cfg.Retryer = newRetryer(opt.MaxAttempts, opt.MaxBackoff)
	cfg.HTTPClient = plainBodyClient{withTimeouts(cfg.HTTPClient)}
	home := cmp.Or(cfg.Region, "us-east-1")
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoCredentials, credentialHint)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err := cfg.Credentials.Retrieve(cctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%v)", ErrNoCredentials, credentialHint, shortCause(err))
	}
	p := &Provider{opt: opt, cfg: cfg, home: home, state: map[string]*regionState{}, buckets: map[bucketKey]*tokenBucket{}}
	p.onDemandC.prices = map[string]map[string]onDemandPrice{}
	if path := p.cachePath("on-demand.json"); path != "" {
		_ = readJSON(path, &p.onDemandC.prices) // a missing or unreadable copy is asked again
	}
	p.pricing = pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = pricingRegion })
	return p, nil
}

// pricingRegion: the Price List answers in few regions; us-east-1 lists them all.
const pricingRegion = "us-east-1"

const credentialHint = "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run `aws sso login`"

// newRetryer retries throttling and 5xx with full-jitter backoff (EC2 throttling
// guide, "Retries and exponential backoff"), capped at maxBackoff. An unreachable
// endpoint is not retried, and the retry quota is off: a back-fill is throttled
// on purpose and must not exhaust a shared bucket.
func newRetryer(attempts int, maxBackoff time.Duration) func() awssdk.Retryer {
	throttle := retry.IsErrorThrottles(retry.DefaultThrottles)
	backoff := retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
		base := 50 * time.Millisecond
		if throttle.IsErrorThrottle(err) == awssdk.TrueTernary || apiCode(err) == "RequestLimitExceeded" {
			base = 200 * time.Millisecond
		}
		d := maxBackoff
		if attempt < 20 {
			d = min(maxBackoff, base<<max(attempt-1, 0))
		}
		return time.Duration(rand.Float64() * float64(d)), nil
	})
	notUnreachable := retry.IsErrorRetryableFunc(func(err error) awssdk.Ternary {
		if _, ok := unreachableCause(err); ok {
			return awssdk.FalseTernary
		}
		return awssdk.UnknownTernary
	})
	return func() awssdk.Retryer {
		r := retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.MaxBackoff = maxBackoff
			o.Backoff = backoff
			o.RateLimiter = ratelimit.None
			o.Retryables = append([]retry.IsErrorRetryable{notUnreachable}, o.Retryables...)
		})
		return retry.AddWithErrorCodes(r, "RequestLimitExceeded", "Throttling", "ServiceUnavailable", "Unavailable", "InternalError")
	}
}

// Name returns "aws".
func (p *Provider) Name() string { return Name }

// Describe returns Descriptor.
func (p *Provider) Describe() domain.Descriptor { return Descriptor }

// Descriptor is the AWS provider's descriptor.
var Descriptor = domain.Descriptor{
	Name: Name, Cloud: domain.CloudAWS, CloudTitle: "AWS",
	IsRegion: IsRegion, RegionExample: "us-east-1",
	Sells:    []*domain.BookingTerms{domain.CapacityBlockTerms, domain.TrainingPlanTerms},
	Declined: awserr.Declined,
	// Request fleets with ValidFrom and ValidUntil (LaunchFleet).
	SchedulesFleets: true,
}

func (p *Provider) client(region string) ec2API {
	return p.clients.get(region, func() ec2API {
		return ec2.NewFromConfig(p.cfg, func(o *ec2.Options) { o.Region = region })
	})
}

// regional keeps a service's client per region, made on first use.
type regional[C any] struct {
	mu sync.Mutex
	m  map[string]C
}

func (r *regional[C]) get(region string, make func() C) C {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.m[region]
	if !ok {
		c = make()
		if r.m == nil {
			r.m = map[string]C{}
		}
		r.m[region] = c
	}
	return c
}

// regions returns the query's regions, the options', or the account's; of a
// mixed list only AWS-shaped names are kept.
func (p *Provider) regions(ctx context.Context, q domain.Query) ([]string, error) {
	for _, names := range [][]string{q.Regions, p.opt.Regions} {
		if len(names) > 0 {
			return awsRegions(names), nil
		}
	}
	p.mu.Lock()
	cached := p.regionsM
	p.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	out, err := p.client(p.home).DescribeRegions(ctx, &ec2.DescribeRegionsInput{}, p.ec2Call(p.home, "DescribeRegions"))
	if err != nil {
		return nil, explain(fmt.Errorf("aws: describe regions in %s: %w", p.home, err))
	}
	var names []string
	for _, r := range out.Regions {
		if r.RegionName != nil {
			names = append(names, *r.RegionName)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("aws: describe regions in %s: the account has no regions enabled", p.home)
	}
	p.mu.Lock()
	p.regionsM = names
	p.mu.Unlock()
	return names, nil
}

var awsRegionPattern = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)

// IsRegion reports whether a name is shaped like an AWS region ("us-gov-west-1").
func IsRegion(name string) bool { return awsRegionPattern.MatchString(name) }

func awsRegions(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !IsRegion(n) })
}

// apiCode returns err's AWS error code ("DryRunOperation"), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// countRefused reports a block search refused for its InstanceCount: said, not skipped as unsold.
func countRefused(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidParameterValue" && strings.Contains(ae.ErrorMessage(), "InstanceCount")
}

var credentialCodes = map[string]bool{
	"AuthFailure": true, "ExpiredToken": true, "ExpiredTokenException": true, "RequestExpired": true,
	"InvalidClientTokenId": true, "UnrecognizedClientException": true, "SignatureDoesNotMatch": true,
	"InvalidAccessKeyId": true,
}

// explain turns credential failures into one error wrapping ErrNoCredentials.
func explain(err error) error {
	if err == nil {
		return nil
	}
	var missing config.SharedConfigProfileNotExistError
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%w: profile %q is not in the shared config; %s", ErrNoCredentials, missing.Profile, credentialHint)
	case strings.Contains(err.Error(), "failed to retrieve credentials"), strings.Contains(err.Error(), "failed to refresh cached credentials"):
		return fmt.Errorf("%w: %s (%v)", ErrNoCredentials, credentialHint, shortCause(err))
	case credentialCodes[apiCode(err)]:
		return fmt.Errorf("%w: AWS refused the credentials (%s): they may have expired; %s", ErrNoCredentials, apiCode(err), credentialHint)
	}
	return err
}

func shortCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ErrInvalidSpec matches a request refused before any call to AWS; it certainly
// bought nothing, so it matches domain.ErrDeclined too.
var ErrInvalidSpec = errors.New("aws: invalid request")

// specError is refused before any call; a limit (a count beyond what the API
// takes) is the user's input, so it also matches domain.ErrInvalidQuery.
type specError struct {
	msg   string
	limit bool
}

func (e specError) Error() string { return e.msg }
func (e specError) Is(target error) bool {
	return target == ErrInvalidSpec || target == domain.ErrDeclined || e.limit && target == domain.ErrInvalidQuery
}

func specErrorf(format string, a ...any) error { return specError{msg: fmt.Sprintf(format, a...)} }

func limitErrorf(format string, a ...any) error {
	return specError{msg: fmt.Sprintf(format, a...), limit: true}
}

// eachRegion runs do for every region, at most opt.Concurrency at once (each
// region's own rate limits still apply), as fanout.Gather.
func eachRegion[T any](p *Provider, regions []string, do func(region string) ([]T, error)) ([]T, domain.RegionErrors) {
	return fanout.Gather(regions, p.opt.Concurrency, do)
}

// pager is an SDK paginator: pages O, options of the client P.
type pager[O, P any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*P)) (O, error)
}

// pages ranges over a paginator's pages; the first error ends it.
func pages[O, P any](ctx context.Context, pg pager[O, P], opts ...func(*P)) iter.Seq2[O, error] {
	return func(yield func(O, error) bool) {
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx, opts...)
			if !yield(page, err) || err != nil {
				return
			}
		}
	}
}

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
	k := bucketKey{region, action}
	b := p.buckets[k]
	if b == nil {
		b = newTokenBucket(lim)
		p.buckets[k] = b
	}
	return b
}
