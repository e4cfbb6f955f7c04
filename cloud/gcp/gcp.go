// Package gcp is the Google Cloud source: GPU machines (Compute Engine), prices
// in parts (Cloud Billing Catalog), calendar-mode reservations, Spot fleets by
// bulk insert, usage from Monitoring. Only cmd imports it: compute/v1 is very large.
package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	billing "google.golang.org/api/cloudbilling/v1"
	"google.golang.org/api/compute/v1"
	monitoring "google.golang.org/api/monitoring/v3"
	"google.golang.org/api/option"

	"github.com/gpumarket/gpumarket/domain"
)

// Name is the provider's name as users write it.
const Name = "gcp"

// DefaultRegions, searched when a query names none, sell A3 and A2 machines.
var DefaultRegions = []string{"us-central1", "us-east4", "us-east5", "us-west1", "europe-west4", "asia-northeast1", "asia-southeast1"}

// Endpoints are the APIs' base URLs (option.WithEndpoint); empty means Google's.
type Endpoints struct {
	Compute, Billing, Monitoring string
}

// Options configure the provider; every field is optional.
type Options struct {
	Project         string // else the credentials' project, then GOOGLE_CLOUD_PROJECT
	CredentialsFile string // a service-account key file; else Application Default Credentials
	Endpoints       Endpoints
	Regions         []string // searched for offerings when a query names none (DefaultRegions)
	// The Spot VMs' boot image, network and disk (config gcp.*), or a template.
	Image, Subnetwork, InstanceTemplate string
	DiskGB                              int64
	ListTTL                             time.Duration // machine types and SKUs reused (1h): Spot prices move monthly
	RetryBase                           time.Duration // first backoff of a throttled call (1s)
	MaxRetries                          int           // attempts of a throttled call (6)
	PollEvery                           time.Duration // how often an operation is asked for (2s)
	CredentialTimeout                   time.Duration // bound on the first token request (15s)
	HTTPClient                          *http.Client
	Now                                 func() time.Time
	Logger                              *slog.Logger
}

// Provider is the Google Cloud source: domain.Provider and its booking, fleet, usage and record abilities.
type Provider struct {
	opt     Options
	project string
	compute *compute.Service
	billing *billing.APIService
	monitor *monitoring.Service
	log     *slog.Logger
	now     func() time.Time

	mu     sync.Mutex
	types  cached[[]machine]
	prices cached[*priceBook]
	sent   map[domain.PoolKey]float64 // last spot price sent, per pool
}

type cached[T any] struct {
	v  T
	at time.Time
}

// ErrNoCredentials wraps New's error when no credentials are found; it matches domain.ErrDeclined.
var ErrNoCredentials = domain.MarkDeclined(errors.New("gcp: no credentials"))

const credentialHint = "set GOOGLE_APPLICATION_CREDENTIALS or gcp.credentials_file to a service-account key file, or run `gcloud auth application-default login`"

// scope covers Compute Engine, the Billing Catalog and Monitoring.
const scope = "https://www.googleapis.com/auth/cloud-platform"

// New finds credentials as Google's libraries do and checks them with one token
// request, so a missing login is one clear error.
func New(ctx context.Context, opt Options) (*Provider, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	domain.OrDefault(&opt.ListTTL, time.Hour)
	domain.OrDefault(&opt.RetryBase, time.Second)
	domain.OrDefault(&opt.MaxRetries, 6)
	domain.OrDefault(&opt.PollEvery, 2*time.Second)
	domain.OrDefault(&opt.CredentialTimeout, 15*time.Second)
	domain.OrDefault(&opt.DiskGB, 200)
	for _, r := range opt.Regions {
		if !IsRegion(r) {
			return nil, fmt.Errorf("gcp region %q: want a Google Cloud region such as us-central1", r)
		}
	}
	creds, err := findCredentials(context.WithoutCancel(ctx), opt.CredentialsFile)
	if err != nil {
		return nil, err
	}
	if err := probe(ctx, creds.TokenSource, opt.CredentialTimeout); err != nil {
		return nil, fmt.Errorf("%w: %s (%v)", ErrNoCredentials, credentialHint, err)
	}
	project := opt.Project
	if project == "" {
		project = creds.ProjectID
	}
	if project == "" {
		project = os.Getenv("GOOGLE_CLOUD_PROJECT")
	}
	if project == "" {
		return nil, errors.New("gcp: no project: set gcp.project (or GOOGLE_CLOUD_PROJECT), or use credentials that name one")
	}
	base := opt.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 60 * time.Second}
	}
	hc := &http.Client{Timeout: base.Timeout, Transport: &oauth2.Transport{
		Source: creds.TokenSource,
		Base:   &retrying{base: transportOf(base), tries: opt.MaxRetries, first: opt.RetryBase, log: opt.Logger},
	}}
	p := &Provider{opt: opt, project: project, log: opt.Logger, now: opt.Now, sent: map[domain.PoolKey]float64{}}
	with := func(endpoint string) []option.ClientOption {
		o := []option.ClientOption{option.WithHTTPClient(hc)}
		if endpoint != "" {
			o = append(o, option.WithEndpoint(endpoint))
		}
		return o
	}
	if p.compute, err = compute.NewService(ctx, with(opt.Endpoints.Compute)...); err != nil {
		return nil, fmt.Errorf("gcp: compute client: %w", err)
	}
	if p.billing, err = billing.NewService(ctx, with(opt.Endpoints.Billing)...); err != nil {
		return nil, fmt.Errorf("gcp: billing client: %w", err)
	}
	if p.monitor, err = monitoring.NewService(ctx, with(opt.Endpoints.Monitoring)...); err != nil {
		return nil, fmt.Errorf("gcp: monitoring client: %w", err)
	}
	return p, nil
}

// findCredentials reads the named key file, else Application Default Credentials.
func findCredentials(ctx context.Context, file string) (*google.Credentials, error) {
	if file == "" {
		if !adcMayFind() {
			return nil, fmt.Errorf("%w: %s", ErrNoCredentials, credentialHint)
		}
		c, err := google.FindDefaultCredentials(ctx, scope)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrNoCredentials, credentialHint)
		}
		return c, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: gcp.credentials_file: %v", ErrNoCredentials, err)
	}
	c, err := google.CredentialsFromJSONWithType(ctx, data, google.ServiceAccount, scope)
	if err != nil {
		return nil, fmt.Errorf("%w: gcp.credentials_file %s: want a service-account key file (%v)", ErrNoCredentials, file, err)
	}
	return c, nil
}

// adcMayFind reports whether ADC has anything to find (a key file, gcloud's
// login, a metadata server): off Google's machines the library would probe
// 169.254.169.254, traffic gpumarket does not send.
func adcMayFind() bool {
	if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "" || os.Getenv("GCE_METADATA_HOST") != "" {
		return true
	}
	// Where the library looks for gcloud's login.
	dir := filepath.Join(os.Getenv("APPDATA"), "gcloud")
	if runtime.GOOS != "windows" {
		home := os.Getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".config", "gcloud")
	}
	if _, err := os.Stat(filepath.Join(dir, "application_default_credentials.json")); err == nil {
		return true
	}
	b, err := os.ReadFile("/sys/class/dmi/id/product_name")
	return err == nil && strings.Contains(string(b), "Google")
}

// probe asks for a token within timeout; a TokenSource takes no context.
func probe(ctx context.Context, ts oauth2.TokenSource, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		_, err := ts.Token()
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			// The JWT flow leaves the answer's RFC 6749 error unread.
			e := struct{ Error, Description string }{re.ErrorCode, re.ErrorDescription}
			var body struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			if e.Error == "" && json.Unmarshal(re.Body, &body) == nil {
				e.Error, e.Description = body.Error, body.Description
			}
			if e.Error != "" {
				return fmt.Errorf("the token endpoint answered %s: %s", e.Error, firstLine(e.Description))
			}
		}
		if err != nil {
			return errors.New(firstLine(err.Error()))
		}
		return nil
	case <-t.C:
		return fmt.Errorf("no token within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// Name returns "gcp".
func (p *Provider) Name() string { return Name }

// Describe returns Descriptor.
func (p *Provider) Describe() domain.Descriptor { return Descriptor }

// Descriptor is the Google Cloud provider's descriptor: Spot VMs cannot start
// later, so gpumarket keeps a fleet's schedule.
var Descriptor = domain.Descriptor{
	Name: Name, Cloud: domain.CloudGCP, CloudTitle: "Google Cloud",
	IsRegion: IsRegion, RegionExample: "us-central1",
	Sells:           []*domain.BookingTerms{domain.CalendarTerms},
	RecordedHistory: true,
	Declined:        Declined,
}

var regionRE = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)

// IsRegion reports whether s is shaped like a Google region ("us-central1"), unlike AWS's or Azure's.
func IsRegion(s string) bool { return regionRE.MatchString(s) }

// regionOf returns a zone's region: "us-central1-a" → "us-central1".
func regionOf(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// regions returns the Google regions among q, or the configured ones (DefaultRegions) when q names none.
func (p *Provider) regions(q []string) []string {
	switch {
	case len(q) > 0:
		return slices.DeleteFunc(slices.Clone(q), func(r string) bool { return !IsRegion(r) })
	case len(p.opt.Regions) > 0:
		return p.opt.Regions
	}
	return DefaultRegions
}

// The abilities the hub and the commands discover by type assertion.
var (
	_ domain.Provider          = (*Provider)(nil)
	_ domain.OfferingFinder    = (*Provider)(nil)
	_ domain.OfferingRefresher = (*Provider)(nil)
	_ domain.Booker            = (*Provider)(nil)
	_ domain.FleetLauncher     = (*Provider)(nil)
	_ domain.FleetValidator    = (*Provider)(nil)
	_ domain.FleetFinder       = (*Provider)(nil)
	_ domain.UsageReporter     = (*Provider)(nil)
)
