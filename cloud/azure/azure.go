// Package azure is the Azure source: GPU sizes (ResourceSKUs), list prices
// (Retail Prices API), spot history and eviction rates (Resource Graph), and
// capacity reservations and spot scale sets, tagged with their ledger rows.
// Without an account it shows list prices only, and says what needs one.
package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/monitor/armmonitor"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"

	"github.com/gpumarket/gpumarket/domain"
)

// Name is the provider's name as users write it.
const Name = "azure"

// DefaultPricesURL is the public Retail Prices API.
const DefaultPricesURL = "https://prices.azure.com/api/retail/prices"

// DefaultRegions, polled when nothing names an Azure region, sell the most GPU sizes.
var DefaultRegions = []string{"eastus", "eastus2", "southcentralus", "westus2", "westus3", "westeurope", "northeurope", "swedencentral"}

// Options configure the provider. Every field is optional.
type Options struct {
	// SubscriptionID for ARM calls; else AZURE_SUBSCRIPTION_ID, else list prices only.
	SubscriptionID string
	// ResourceGroup holds the reservations and scale sets gpumarket makes.
	ResourceGroup string
	// PricesURL is the Retail Prices API (DefaultPricesURL when empty).
	PricesURL string
	// Regions when the query names none (DefaultRegions when empty).
	Regions []string
	// Credential signs ARM calls; nil is DefaultAzureCredential, probed once.
	Credential azcore.TokenCredential
	// CredentialTimeout bounds the first token request (default 10s): no waiting on IMDS.
	CredentialTimeout time.Duration
	// ClientOptions go to every ARM client (tests point them at a fake).
	ClientOptions *arm.ClientOptions
	// HTTPClient fetches the Retail Prices API (default: 60s timeout).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger

	// ImageID (a resource id or "publisher:offer:sku:version"), SubnetID,
	// AdminUsername and SSHPublicKey make the scale sets' VM profile.
	ImageID, SubnetID, AdminUsername, SSHPublicKey string

	// ListTTL reuses SKUs, list prices and eviction rates between polls (default 15m).
	ListTTL time.Duration
	// HistoryLookback widens a live poll's history (default 24h): Azure publishes a price late.
	HistoryLookback time.Duration
	// RetryBase (default 1s) and MaxRetries (5) pace Retail Prices retries.
	RetryBase  time.Duration
	MaxRetries int
	// PollFrequency polls long-running ARM operations (default 10s).
	PollFrequency time.Duration
	// Concurrency bounds regions fetched at once; 0 leaves it to the APIs' limits.
	Concurrency int
	// PricesInFlight bounds Retail Prices requests (default DefaultPricesInFlight): it documents no limit.
	PricesInFlight int
}

// Provider is the Azure source: domain.Provider and its booking, fleet and
// record abilities, each asserted beside its methods.
type Provider struct {
	opt     Options
	pricesU string
	http    *http.Client
	log     *slog.Logger
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	lim     *limits

	authMu   sync.Mutex
	authDone bool
	authAt   time.Time
	authErr  error // why the provider runs without an account
	arm      *armClients

	cacheMu sync.Mutex
	skus    map[string]cached[[]gpuSize]
	prices  map[string]cached[map[string]retailPrice]
	evict   map[string]cached[map[string]string]
	// hasHistory: pools priced by Resource Graph, so the list price's point is not mixed in.
	hasHistory map[domain.PoolKey]bool
}

type cached[T any] struct {
	v  T
	at time.Time
}

type armClients struct {
	skus     *armcompute.ResourceSKUsClient
	usage    *armcompute.UsageClient
	groups   *armcompute.CapacityReservationGroupsClient
	reserve  *armcompute.CapacityReservationsClient
	vmss     *armcompute.VirtualMachineScaleSetsClient
	vms      *armcompute.VirtualMachinesClient
	graph    *armresourcegraph.Client
	metrics  *armmonitor.MetricsClient
	subID    string
	resGroup string
}

// New makes the provider without a network call; the credential is probed on first use.
func New(ctx context.Context, opt Options) (*Provider, error) {
	_ = ctx
	if opt.SubscriptionID == "" {
		opt.SubscriptionID = os.Getenv("AZURE_SUBSCRIPTION_ID")
	}
	if opt.PricesURL == "" {
		opt.PricesURL = DefaultPricesURL
	}
	if !strings.HasPrefix(opt.PricesURL, "http://") && !strings.HasPrefix(opt.PricesURL, "https://") {
		return nil, fmt.Errorf("azure prices_url %q: want an http:// or https:// URL", opt.PricesURL)
	}
	for _, r := range opt.Regions {
		if !IsRegion(r) {
			return nil, fmt.Errorf("azure region %q: want an Azure region name such as eastus or westeurope", r)
		}
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: newTransport()}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Concurrency < 0 {
		return nil, fmt.Errorf("azure concurrency %d: want 0 (every region at once) or a positive bound", opt.Concurrency)
	}
	domain.OrDefault(&opt.CredentialTimeout, 10*time.Second)
	domain.OrDefault(&opt.ListTTL, 15*time.Minute)
	domain.OrDefault(&opt.HistoryLookback, 24*time.Hour)
	domain.OrDefault(&opt.RetryBase, time.Second)
	domain.OrDefault(&opt.MaxRetries, 5)
	domain.OrDefault(&opt.PollFrequency, 10*time.Second)
	domain.OrDefault(&opt.PricesInFlight, DefaultPricesInFlight)
	return &Provider{
		opt: opt, pricesU: opt.PricesURL, http: opt.HTTPClient, log: opt.Logger, now: opt.Now,
		sleep:      domain.Sleep,
		lim:        newLimits(opt.PricesInFlight),
		skus:       map[string]cached[[]gpuSize]{},
		prices:     map[string]cached[map[string]retailPrice]{},
		evict:      map[string]cached[map[string]string]{},
		hasHistory: map[domain.PoolKey]bool{},
	}, nil
}

var _ domain.Provider = (*Provider)(nil)

// Name returns "azure".
func (p *Provider) Name() string { return Name }

// Describe returns Descriptor: only the provider's own refusals are a definite "no".
func (p *Provider) Describe() domain.Descriptor { return Descriptor }

// Descriptor is the Azure provider's descriptor.
var Descriptor = domain.Descriptor{
	Name: Name, Cloud: domain.CloudAzure, CloudTitle: "Azure",
	IsRegion: IsRegion, RegionExample: "eastus",
	Sells: []*domain.BookingTerms{domain.ReservationTerms},
}

var regionRE = regexp.MustCompile(`^[a-z][a-z0-9]{2,40}$`)

// IsRegion reports whether s looks like an Azure region ("eastus"): no dashes, unlike AWS's.
func IsRegion(s string) bool { return regionRE.MatchString(s) }

// regions returns the query's Azure regions, or the configured ones when it names none.
func (p *Provider) regions(q domain.Query) []string {
	if len(q.Regions) > 0 {
		var out []string
		seen := map[string]bool{}
		for _, r := range q.Regions {
			r = strings.ToLower(strings.TrimSpace(r))
			if IsRegion(r) && !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		return out
	}
	if len(p.opt.Regions) > 0 {
		return p.opt.Regions
	}
	return DefaultRegions
}

var errNoAccount = errors.New("azure: this needs a signed-in account: set azure.subscription_id (or AZURE_SUBSCRIPTION_ID) and sign in (az login, AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, or a managed identity)")

// clients returns the ARM clients, probing the credential once (again after
// ListTTL if it failed); nil with an error means list prices only.
func (p *Provider) clients(ctx context.Context) (*armClients, error) {
	p.authMu.Lock()
	defer p.authMu.Unlock()
	if p.authDone && (p.authErr == nil || p.now().Sub(p.authAt) < p.opt.ListTTL) {
		return p.arm, p.authErr
	}
	p.authDone, p.authAt = true, p.now()
	p.arm, p.authErr = p.connect(ctx)
	if p.authErr != nil {
		p.log.Info("azure: list prices only", "reason", p.authErr)
	}
	return p.arm, p.authErr
}

func (p *Provider) connect(ctx context.Context) (*armClients, error) {
	sub := p.opt.SubscriptionID
	if sub == "" {
		return nil, errors.New("no subscription configured (azure.subscription_id or AZURE_SUBSCRIPTION_ID)")
	}
	cred := p.opt.Credential
	if cred == nil {
		var o *azidentity.DefaultAzureCredentialOptions
		if p.opt.ClientOptions != nil {
			o = &azidentity.DefaultAzureCredentialOptions{ClientOptions: p.opt.ClientOptions.ClientOptions}
		}
		c, err := azidentity.NewDefaultAzureCredential(o)
		if err != nil {
			return nil, fmt.Errorf("no Azure credential: %w", err)
		}
		cred = c
	}
	scope := "https://management.azure.com/.default"
	if p.opt.ClientOptions != nil {
		if svc, ok := p.opt.ClientOptions.Cloud.Services[cloud.ResourceManager]; ok && svc.Audience != "" {
			scope = strings.TrimSuffix(svc.Audience, "/") + "/.default"
		}
	}
	pctx, cancel := context.WithTimeout(ctx, p.opt.CredentialTimeout)
	defer cancel()
	if _, err := cred.GetToken(pctx, policy.TokenRequestOptions{Scopes: []string{scope}}); err != nil {
		return nil, fmt.Errorf("not signed in to Azure: %w", firstLine(err))
	}
	co := p.clientOptions()
	f, err := armcompute.NewClientFactory(sub, cred, co)
	if err != nil {
		return nil, fmt.Errorf("azure compute clients: %w", err)
	}
	c := &armClients{subID: sub, resGroup: p.opt.ResourceGroup,
		skus: f.NewResourceSKUsClient(), usage: f.NewUsageClient(), groups: f.NewCapacityReservationGroupsClient(),
		reserve: f.NewCapacityReservationsClient(), vmss: f.NewVirtualMachineScaleSetsClient(), vms: f.NewVirtualMachinesClient()}
	if c.graph, err = armresourcegraph.NewClient(cred, co); err != nil {
		return nil, fmt.Errorf("azure resource graph client: %w", err)
	}
	// An ARM call like the others: same read bucket and retry rule.
	if c.metrics, err = armmonitor.NewMetricsClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure monitor client: %w", err)
	}
	return c, nil
}

// clientOptions add the rate limits (a token per attempt) and the retry rule to the configured ones.
func (p *Provider) clientOptions() *arm.ClientOptions {
	var co arm.ClientOptions
	if p.opt.ClientOptions != nil {
		co = *p.opt.ClientOptions
	}
	co.PerRetryPolicies = append(append([]policy.Policy(nil), co.PerRetryPolicies...), throttlePolicy{p.lim})
	if co.Retry.ShouldRetry == nil {
		co.Retry.ShouldRetry = shouldRetry
	}
	if co.Transport == nil {
		co.Transport = &http.Client{Transport: newTransport()}
	}
	return &co
}

// listAll reads every page of an ARM list; values picks a page's items, nil ones skipped.
func listAll[P, T any](ctx context.Context, pg *runtime.Pager[P], values func(P) []*T) ([]*T, error) {
	var out []*T
	for pg.More() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range values(page) {
			if v != nil {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// firstLine shortens azidentity's multi-paragraph errors for a header note.
func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return errors.New(strings.TrimSpace(s[:i]))
	}
	return err
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func conflict(err error) bool { return statusOf(err) == http.StatusConflict }

func isNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// refuse makes a declined error for a request refused before any call that spends.
func refuse(format string, args ...any) error {
	return domain.MarkDeclined(fmt.Errorf(format, args...))
}

// settle classifies an ARM error: a definite "no" is a 4xx but 408 and 429, or
// an operation ended Failed or Canceled. Anything else is unknown and looked up.
func settle(err error) error {
	s := statusOf(err)
	if err == nil || s == 0 {
		return err
	}
	if s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500 {
		return err
	}
	return domain.MarkDeclined(err)
}

// shortError tells an ARM error in one line ("404 ResourceNotFound: …") where
// azcore's spans a dozen; the error stays behind Unwrap.
type shortError struct{ err error }

func (e shortError) Error() string { return armCause(e.err) }
func (e shortError) Unwrap() error { return e.err }

func short(err error) error {
	if err == nil {
		return nil
	}
	return shortError{err}
}

// armCause is an ARM error's status, code and message, or another error's first line.
func armCause(err error) string {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return firstLine(err).Error()
	}
	s := strconv.Itoa(re.StatusCode)
	if re.ErrorCode != "" {
		s += " " + re.ErrorCode
	}
	if re.RawResponse != nil {
		if body, perr := runtime.Payload(re.RawResponse); perr == nil {
			var doc struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &doc) == nil && doc.Error.Message != "" {
				s += ": " + firstLine(errors.New(doc.Error.Message)).Error()
			}
		}
	}
	return s
}
