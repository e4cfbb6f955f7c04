// Package azure is gpumarket's Azure source: GPU VM sizes and their zone
// restrictions from ResourceSKUs (armcompute), current list prices from the
// public Retail Prices API, 90 days of spot price history and eviction rates
// from Azure Resource Graph (table SpotResources), and the actions Azure
// offers: On-demand Capacity Reservations as bookings and spot scale sets as
// fleets, each tagged with the ledger row it was made for so that the
// cloud remembers them (ListRecords).
//
// Every region is fetched at once; the APIs' documented limits, not a fixed
// number of regions, pace the calls (throttle.go), and the regions of a
// fetch share their Resource Graph queries (graph.go).
//
// Without a signed-in account (no subscription, or DefaultAzureCredential
// finds nothing) the provider still shows current list prices, which need no
// credentials, and says plainly that history, eviction rates and actions
// need an account.
package azure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"

	"github.com/gpumarket/gpumarket/domain"
)

// Name is the provider's name as users write it.
const Name = "azure"

// DefaultPricesURL is the public Retail Prices API.
const DefaultPricesURL = "https://prices.azure.com/api/retail/prices"

// DefaultRegions are polled when neither the query nor the options name any
// Azure region: the regions that sell most GPU sizes.
var DefaultRegions = []string{"eastus", "eastus2", "southcentralus", "westus2", "westus3", "westeurope", "northeurope", "swedencentral"}

// Options configure the provider. Every field is optional.
type Options struct {
	// SubscriptionID is the subscription the ARM calls are made in; empty
	// means AZURE_SUBSCRIPTION_ID, and without either only list prices
	// are shown.
	SubscriptionID string
	// ResourceGroup holds the reservations and scale sets gpumarket makes.
	ResourceGroup string
	// PricesURL is the Retail Prices API (DefaultPricesURL when empty).
	PricesURL string
	// Regions are polled when the query names no Azure region
	// (DefaultRegions when empty).
	Regions []string
	// Credential signs ARM and Resource Graph calls. Nil means
	// azidentity.DefaultAzureCredential, probed once with CredentialTimeout.
	Credential azcore.TokenCredential
	// CredentialTimeout bounds the first token request (default 10s), so
	// that a machine without any Azure login does not wait on IMDS.
	CredentialTimeout time.Duration
	// ClientOptions are passed to every ARM client; tests point them at a
	// fake server through their cloud configuration.
	ClientOptions *arm.ClientOptions
	// HTTPClient fetches the Retail Prices API (default a client with a
	// 60s timeout).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger

	// ImageID, SubnetID, AdminUsername and SSHPublicKey make the spot
	// scale sets' VM profile (config azure.image_id …). ImageID is an
	// image or gallery image resource id, or a marketplace URN
	// "publisher:offer:sku:version".
	ImageID, SubnetID, AdminUsername, SSHPublicKey string

	// ListTTL is how long SKUs, list prices and eviction rates are reused
	// between polls (default 15m): they change a few times a day, and
	// the hub polls every 30s.
	ListTTL time.Duration
	// HistoryLookback widens a live poll's history query into the past
	// (default 24h), because Azure publishes a spot price some time after
	// the moment it takes effect.
	HistoryLookback time.Duration
	// RetryBase is the first backoff of a throttled or failed Retail
	// Prices request (default 1s); MaxRetries bounds the retries
	// (default 5).
	RetryBase  time.Duration
	MaxRetries int
	// PollFrequency is how often a long-running ARM operation is polled
	// (default 10s).
	PollFrequency time.Duration
	// Concurrency bounds how many regions are fetched at once; 0 (the
	// default) fetches every region at once, and the APIs' own documented
	// limits (see throttle.go) bound the calls instead.
	Concurrency int
	// PricesInFlight bounds the Retail Prices requests in flight
	// (default DefaultPricesInFlight): that API documents no limit.
	PricesInFlight int
}

// Provider is the Azure source. It implements domain.Provider,
// OfferingFinder, OfferingRefresher, Booker, BookingReleaser,
// FleetLauncher, FleetFinder and RecordLister.
type Provider struct {
	opt     Options
	pricesU string
	http    *http.Client
	log     *slog.Logger
	now     func() time.Time
	// sleep waits between retries; tests replace it to see the waits.
	sleep func(ctx context.Context, d time.Duration) error
	// lim holds the APIs' rate limits, shared by every call.
	lim *limits

	authMu   sync.Mutex
	authDone bool
	authAt   time.Time
	authErr  error // why the provider runs without an account
	arm      *armClients

	cacheMu sync.Mutex
	skus    map[string]cached[[]gpuSize]
	prices  map[string]cached[map[string]retailPrice]
	evict   map[string]cached[map[string]string]
	// hasHistory marks pools whose spot prices come from Resource
	// Graph, so the list price's single point is not mixed in.
	hasHistory map[domain.PoolKey]bool
	// gaps are the regions whose history a failed fetch missed.
	gaps map[string]domain.Gap
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
	subID    string
	resGroup string
}

// New makes the provider. It does no network call: the credential is
// probed at the first Fetch or action.
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
	if opt.CredentialTimeout <= 0 {
		opt.CredentialTimeout = 10 * time.Second
	}
	if opt.ListTTL <= 0 {
		opt.ListTTL = 15 * time.Minute
	}
	if opt.HistoryLookback <= 0 {
		opt.HistoryLookback = 24 * time.Hour
	}
	if opt.RetryBase <= 0 {
		opt.RetryBase = time.Second
	}
	if opt.MaxRetries <= 0 {
		opt.MaxRetries = 5
	}
	if opt.PollFrequency <= 0 {
		opt.PollFrequency = 10 * time.Second
	}
	if opt.Concurrency < 0 {
		return nil, fmt.Errorf("azure concurrency %d: want 0 (every region at once) or a positive bound", opt.Concurrency)
	}
	if opt.PricesInFlight <= 0 {
		opt.PricesInFlight = DefaultPricesInFlight
	}
	return &Provider{
		opt: opt, pricesU: opt.PricesURL, http: opt.HTTPClient, log: opt.Logger, now: opt.Now,
		sleep:      sleepCtx,
		lim:        newLimits(opt.PricesInFlight),
		skus:       map[string]cached[[]gpuSize]{},
		prices:     map[string]cached[map[string]retailPrice]{},
		evict:      map[string]cached[map[string]string]{},
		hasHistory: map[domain.PoolKey]bool{},
		gaps:       map[string]domain.Gap{},
	}, nil
}

// Name returns "azure".
func (p *Provider) Name() string { return Name }

// Describe says what the Azure provider is: real Azure, its regions, and
// capacity reservations for sale. Its own refusals match
// domain.ErrDeclined; no other error is a definite "no".
func (p *Provider) Describe() domain.Descriptor { return Descriptor }

// Descriptor is the Azure provider's descriptor.
var Descriptor = domain.Descriptor{
	Name: Name, Cloud: domain.CloudAzure,
	IsRegion: IsRegion, RegionExample: "eastus",
	Sells: []*domain.BookingTerms{domain.ReservationTerms},
}

var regionRE = regexp.MustCompile(`^[a-z][a-z0-9]{2,40}$`)

// IsRegion reports whether s looks like an Azure region name ("eastus",
// "westeurope"): lower-case letters and digits, no dashes, which tells it
// from AWS's "us-east-1" in a shared --region list.
func IsRegion(s string) bool { return regionRE.MatchString(s) }

// regions returns the Azure regions a query asks for: the Azure names among
// its regions, or the configured ones when it names none at all.
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

// errNoAccount is returned by the actions when there is no signed-in
// account.
var errNoAccount = errors.New("azure: this needs a signed-in account: set azure.subscription_id (or AZURE_SUBSCRIPTION_ID) and sign in (az login, AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, or a managed identity)")

// clients returns the ARM clients, probing the credential the first time
// (and again after ListTTL when it failed). A nil result with an error
// means list prices only.
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
	c := &armClients{subID: sub, resGroup: p.opt.ResourceGroup}
	var err error
	co := p.clientOptions()
	if c.skus, err = armcompute.NewResourceSKUsClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure resource SKUs client: %w", err)
	}
	if c.usage, err = armcompute.NewUsageClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure usage client: %w", err)
	}
	if c.groups, err = armcompute.NewCapacityReservationGroupsClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure capacity reservation groups client: %w", err)
	}
	if c.reserve, err = armcompute.NewCapacityReservationsClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure capacity reservations client: %w", err)
	}
	if c.vmss, err = armcompute.NewVirtualMachineScaleSetsClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure scale sets client: %w", err)
	}
	if c.vms, err = armcompute.NewVirtualMachinesClient(sub, cred, co); err != nil {
		return nil, fmt.Errorf("azure virtual machines client: %w", err)
	}
	if c.graph, err = armresourcegraph.NewClient(cred, co); err != nil {
		return nil, fmt.Errorf("azure resource graph client: %w", err)
	}
	return c, nil
}

// clientOptions are the configured ARM client options with the
// provider's rate limits (one token per attempt) and its retry rule (a
// connection that never opened is not retried).
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

// firstLine shortens azidentity's multi-paragraph errors to their first
// line, for a header note.
func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return errors.New(strings.TrimSpace(s[:i]))
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The abilities the hub and the commands discover by type assertion.
var (
	_ domain.Provider          = (*Provider)(nil)
	_ domain.OfferingFinder    = (*Provider)(nil)
	_ domain.Booker            = (*Provider)(nil)
	_ domain.FleetLauncher     = (*Provider)(nil)
	_ domain.FleetFinder       = (*Provider)(nil)
	_ domain.RecordLister      = (*Provider)(nil)
	_ domain.BookingReleaser   = (*Provider)(nil)
	_ domain.OfferingRefresher = (*Provider)(nil)
)
