package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/cloud/azure"
	"github.com/gpumarket/gpumarket/cloud/azure/azuretest"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
)

// Partial answers: a one-shot command prints what the
// regions that answered gave, one warning line per region that did not
// (its cause, or that it did not answer within --timeout), exits 0 when
// any answered and 1 only when none did. Each cloud is tested against its
// local endpoint with one region hanging, failing with a 500, throttled
// without end, or unreachable.

// runTable runs one command line over a provider table of the test's.
func runTable(t *testing.T, table app.Table, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := (&cli{table: table}).run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// withRow returns the default table with the named provider's row built
// by build instead.
func withRow(name string, build func(context.Context, *app.Settings) (domain.Provider, error)) app.Table {
	t := app.DefaultTable()
	for i := range t {
		if t[i].Desc.Name == name {
			t[i].Build = build
		}
	}
	return t
}

// pricesByRegion decodes `prices -o json` and counts its rows by
// provider and region.
func pricesByRegion(t *testing.T, out string) map[string]int {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out)
	}
	n := map[string]int{}
	for _, r := range rows {
		n[fmt.Sprint(r["provider"], " ", r["region"])]++
	}
	return n
}

// warningLines returns the stderr lines that warn about who ("aws
// us-west-2").
func warningLines(stderr, who string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "gpumarket: warning: "+who+":") {
			out = append(out, l)
		}
	}
	return out
}

// closedAddr is a loopback address nothing listens on: a dial is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// unreachable sends the requests that pick says so to a closed port,
// where the kernel refuses the connection, and the rest on.
type unreachable struct {
	addr string
	pick func(*http.Request) bool
	base http.RoundTripper
}

func (u unreachable) RoundTrip(r *http.Request) (*http.Response, error) {
	if u.pick(r) {
		r = r.Clone(r.Context())
		r.URL.Host = u.addr
	}
	return u.base.RoundTrip(r)
}

// hangWhere holds the requests that pick says so until the caller gives
// up, and serves the rest.
func hangWhere(pick func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pick(r) {
			// Read the body first: the server notices the caller hang
			// up only once the request has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		next.ServeHTTP(w, r)
	})
}

// signedFor reports whether an AWS request is signed for the region (the
// SigV4 credential scope names it).
func signedFor(region string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return strings.Contains(r.Header.Get("Authorization"), "/"+region+"/ec2/")
	}
}

// awsCase is one fault of us-west-2 at the local EC2 endpoint.
type awsCase struct {
	name  string
	fault *ec2test.Fault // added to the endpoint
	hang  bool           // the region's calls never answer
	down  bool           // the region's endpoint refuses connections
	// slowRetries keeps the SDK's default retries (6 attempts, backoff up
	// to 20 s), which outlast --timeout; otherwise they are quick and the
	// region fails with its cause.
	slowRetries bool
	want        *regexp.Regexp // the region's warning
}

func TestPricesPrintsAnsweredAWSRegionsWhenOneFails(t *testing.T) {
	late := regexp.MustCompile(`did not answer within --timeout 3s`)
	cases := []awsCase{
		{name: "hang", hang: true, want: late},
		{name: "500", fault: &ec2test.Fault{Status: http.StatusInternalServerError, Code: "InternalError",
			Message: "An internal error has occurred."}, want: regexp.MustCompile(`InternalError`)},
		// (The SDK's jittered backoff may, about once in a thousand
		// runs, give up within 3 s: then the cause is said instead.)
		{name: "500 past --timeout", fault: &ec2test.Fault{Status: http.StatusInternalServerError, Code: "InternalError",
			Message: "An internal error has occurred."}, slowRetries: true, want: regexp.MustCompile(late.String() + `|InternalError`)},
		{name: "throttled", fault: ptr(ec2test.Throttle("", "", 0)), want: regexp.MustCompile(`RequestLimitExceeded`)},
		{name: "throttled past --timeout", fault: ptr(ec2test.Throttle("", "", 0)), slowRetries: true, want: regexp.MustCompile(late.String() + `|RequestLimitExceeded`)},
		{name: "unreachable", down: true, want: regexp.MustCompile(`connection refused`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			now := time.Now().UTC().Truncate(time.Minute)
			fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1", "us-west-2"}, now.Add(-26*time.Hour), now, time.Hour)...)
			if c.fault != nil {
				f := *c.fault
				f.Region = "us-west-2"
				fake.AddFault(f)
			}
			var h http.Handler = fake
			if c.hang {
				h = hangWhere(signedFor("us-west-2"), fake)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := srv.Client()
			if c.down {
				client = &http.Client{Transport: unreachable{closedAddr(t), signedFor("us-west-2"), srv.Client().Transport}}
			}
			table := withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
				opt := aws.Options{
					Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log,
					Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: client,
						Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
				}
				if !c.slowRetries {
					opt.MaxAttempts, opt.MaxBackoff = 3, 5*time.Millisecond
				}
				return aws.New(ctx, opt)
			})
			code, out, errOut := runTable(t, table, "prices", "--provider", "aws", "--region", "us-east-1,us-west-2", "--timeout", "3s", "-o", "json")
			t.Logf("stderr:\n%s", errOut)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (us-east-1 answered): %s", code, errOut)
			}
			rows := pricesByRegion(t, out)
			if rows["aws us-east-1"] == 0 || rows["aws us-west-2"] != 0 || len(rows) != 1 {
				t.Errorf("rows by region %v, want us-east-1's only", rows)
			}
			w := warningLines(errOut, "aws us-west-2")
			if len(w) != 1 || !c.want.MatchString(w[0]) {
				t.Errorf("us-west-2 warnings %q, want one matching %q\nstderr: %s", w, c.want, errOut)
			}
			if w := warningLines(errOut, "aws us-east-1"); len(w) != 0 {
				t.Errorf("the region that answered was warned of: %q", w)
			}
		})
	}
}

// Every region failing is no answer: exit 1, each region's cause said.
func TestPricesExitsOneWhenNoAWSRegionAnswers(t *testing.T) {
	isolate(t)
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1", "us-west-2"}, now.Add(-26*time.Hour), now, time.Hour)...)
	fake.AddFault(ec2test.Fault{Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred."})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	table := withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	})
	code, out, errOut := runTable(t, table, "prices", "--provider", "aws", "--region", "us-east-1,us-west-2", "--timeout", "20s", "-o", "json")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	if !strings.Contains(errOut, "gpumarket: no source or region answered") {
		t.Errorf("stderr %q, want the final error", errOut)
	}
}

// azureCase is one fault of westeurope at the local Retail Prices API.
type azureCase struct {
	name   string
	status int    // every westeurope page answers this status
	header string // with this Retry-After
	hang   bool
	down   bool
	// slowRetries keeps the provider's default backoff (1 s doubling,
	// or what Retry-After asks), which outlasts --timeout.
	slowRetries bool
	want        *regexp.Regexp
}

// westeurope picks the Retail Prices requests of the region.
func westeurope(r *http.Request) bool {
	return strings.Contains(r.URL.Query().Get("$filter"), "armRegionName eq 'westeurope'")
}

// azurePrices serves the Retail Prices fake with westeurope faulted as c
// says, and returns the table whose azure row reads it with no account.
func azurePrices(t *testing.T, c azureCase) app.Table {
	t.Helper()
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	ps, err := azuretest.LoadPrices(filepath.Join("..", "testdata", "azure", "retailprices", "items.json"), 5)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = ps
	switch {
	case c.hang:
		h = hangWhere(westeurope, ps)
	case c.status != 0:
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !westeurope(r) {
				ps.ServeHTTP(w, r)
				return
			}
			if c.header != "" {
				w.Header().Set("Retry-After", c.header)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"Error":{"Code":"%s","Message":"%s"}}`, http.StatusText(c.status), http.StatusText(c.status))
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := srv.Client()
	if c.down {
		client = &http.Client{Transport: unreachable{closedAddr(t), westeurope, srv.Client().Transport}}
	}
	return withRow("azure", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		opt := azure.Options{PricesURL: srv.URL, HTTPClient: client, Logger: e.Log}
		if !c.slowRetries {
			opt.RetryBase, opt.MaxRetries = time.Millisecond, 2
		}
		return azure.New(ctx, opt)
	})
}

func TestPricesPrintsAnsweredAzureRegionsWhenOneFails(t *testing.T) {
	late := regexp.MustCompile(`did not answer within --timeout 3s`)
	cases := []azureCase{
		{name: "hang", hang: true, want: late},
		{name: "500", status: http.StatusInternalServerError, want: regexp.MustCompile(`HTTP 500`)},
		{name: "throttled", status: http.StatusTooManyRequests, want: regexp.MustCompile(`HTTP 429`)},
		{name: "throttled past --timeout", status: http.StatusTooManyRequests, header: "10", slowRetries: true, want: late},
		{name: "unreachable", down: true, want: regexp.MustCompile(`connection refused`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			table := azurePrices(t, c)
			code, out, errOut := runTable(t, table, "prices", "--provider", "azure", "--region", "eastus,westeurope", "--timeout", "3s", "-o", "json")
			t.Logf("stderr:\n%s", errOut)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (eastus answered): %s", code, errOut)
			}
			rows := pricesByRegion(t, out)
			if rows["azure eastus"] == 0 || len(rows) != 1 {
				t.Errorf("rows by region %v, want eastus's only", rows)
			}
			w := warningLines(errOut, "azure westeurope")
			if len(w) != 1 || !c.want.MatchString(w[0]) {
				t.Errorf("westeurope warnings %q, want one matching %q\nstderr: %s", w, c.want, errOut)
			}
			if w := warningLines(errOut, "azure eastus"); len(w) != 0 {
				t.Errorf("the region that answered was warned of: %q", w)
			}
		})
	}
}

// The Azure prices endpoint failing (here: hanging, in every region)
// does not hide the simulated market's rows.
func TestPricesPrintsSimWhenAzureFails(t *testing.T) {
	for _, c := range []azureCase{
		{name: "500", status: http.StatusInternalServerError},
		{name: "hang", hang: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			table := azurePrices(t, c)
			code, out, errOut := runTable(t, table, "prices", "--provider", "sim,azure", "--region", "us-east-1,westeurope", "--timeout", "3s", "-o", "json")
			t.Logf("stderr:\n%s", errOut)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (the sim answered): %s", code, errOut)
			}
			rows := pricesByRegion(t, out)
			if rows["sim us-east-1"] == 0 || rows["azure westeurope"] != 0 {
				t.Errorf("rows by region %v, want the sim's us-east-1 only", rows)
			}
			if w := warningLines(errOut, "azure westeurope"); len(w) != 1 {
				t.Errorf("westeurope warnings %q, want one\nstderr: %s", w, errOut)
			}
			// "every region failed" would say the region's cause twice.
			if w := warningLines(errOut, "azure"); len(w) != 0 {
				t.Errorf("a source-wide warning beside the region's: %q", w)
			}
		})
	}
}

// faultySim is the simulated market with one region hanging (its events
// withheld and the fetch never ending) or failing.
type faultySim struct {
	*sim.Market
	region string
	hang   bool
}

func (f faultySim) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	err := f.Market.Fetch(ctx, req, func(ev domain.Event) {
		if ev.Region != f.region {
			sink(ev)
		}
	})
	if err != nil {
		return err
	}
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	sink(domain.Event{Region: f.region, Err: fmt.Errorf("sim back-fill of %s: out of capacity", f.region)})
	return nil
}

func TestPricesPrintsAnsweredSimRegionsWhenOneFails(t *testing.T) {
	for _, c := range []struct {
		name string
		hang bool
		want string
	}{
		{"hang", true, "did not answer within --timeout 1s"},
		{"error", false, "sim back-fill of us-west-2: out of capacity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			table := withRow("sim", func(_ context.Context, e *app.Settings) (domain.Provider, error) {
				return faultySim{sim.New(sim.Options{Seed: e.Config.Sim.Seed}), "us-west-2", c.hang}, nil
			})
			code, out, errOut := runTable(t, table, "prices", "--region", "us-east-1,us-west-2", "--timeout", "1s", "-o", "json")
			t.Logf("stderr:\n%s", errOut)
			if code != 0 {
				t.Fatalf("exit %d, want 0: %s", code, errOut)
			}
			rows := pricesByRegion(t, out)
			if rows["sim us-east-1"] == 0 || len(rows) != 1 {
				t.Errorf("rows by region %v, want us-east-1's only", rows)
			}
			if w := warningLines(errOut, "sim us-west-2"); len(w) != 1 || !strings.Contains(w[0], c.want) {
				t.Errorf("us-west-2 warnings %q, want one saying %q", w, c.want)
			}

			// history the same.
			code, out, errOut = runTable(t, table, "history", "--region", "us-east-1,us-west-2", "--timeout", "1s", "-o", "json")
			if code != 0 {
				t.Fatalf("history: exit %d, want 0: %s", code, errOut)
			}
			if rows := pricesByRegion(t, out); rows["sim us-east-1"] == 0 || len(rows) != 1 {
				t.Errorf("history rows by region %v, want us-east-1's only", rows)
			}
			if w := warningLines(errOut, "sim us-west-2"); len(w) != 1 || !strings.Contains(w[0], c.want) {
				t.Errorf("history: us-west-2 warnings %q, want one saying %q", w, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// A region name no provider in use has is refused, even beside one it
// has, and one a cloud's provider takes but the cloud does not know is
// warned of rather than dropped with no word.
func TestPricesSaysWhatBecameOfEveryRegionAsked(t *testing.T) {
	isolate(t)
	code, out, errOut := runCmd(t, "prices", "--region", "us-east-1,mars-1")
	if code != 2 || out != "" || !strings.Contains(errOut, "--region mars-1: no provider in use has a region of that name") {
		t.Errorf("sim with mars-1: exit %d, stderr %q; want 2 naming mars-1", code, errOut)
	}

	// Azure's provider takes any well-formed name; the Retail Prices API
	// answers an unknown one with no items.
	table := azurePrices(t, azureCase{})
	code, out, errOut = runTable(t, table, "prices", "--provider", "azure", "--region", "eastus,marsville", "--timeout", "20s", "-o", "json")
	if code != 0 || pricesByRegion(t, out)["azure eastus"] == 0 {
		t.Fatalf("azure with marsville: exit %d, want 0 with eastus's rows: %s", code, errOut)
	}
	if w := warningLines(errOut, "azure marsville"); len(w) != 1 || !strings.Contains(w[0], "answered with no GPU pools") || !strings.Contains(w[0], "such as eastus") {
		t.Errorf("marsville warnings %q, want one saying it answered with no pools", w)
	}

	// AWS refuses a region the account does not have.
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-26*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	table = withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	})
	code, out, errOut = runTable(t, table, "prices", "--provider", "aws", "--region", "us-east-1,us-mars-1", "--timeout", "20s", "-o", "json")
	if code != 0 || pricesByRegion(t, out)["aws us-east-1"] == 0 {
		t.Fatalf("aws with us-mars-1: exit %d, want 0 with us-east-1's rows: %s", code, errOut)
	}
	if w := warningLines(errOut, "aws us-mars-1"); len(w) != 1 || !strings.Contains(w[0], "AuthFailure") {
		t.Errorf("us-mars-1 warnings %q, want one with AWS's refusal", w)
	}
}

// noAWSCredentials leaves the AWS credential chain nothing to find, at
// once (no instance metadata service is asked).
func noAWSCredentials(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_REGION", "us-east-1")
}

// A cloud that cannot be set up (no AWS credentials) does not hide the
// simulated market's rows or offerings: it is one warning line. Alone, it
// is the command's error.
func TestCloudWithoutCredentialsDoesNotHideTheOthers(t *testing.T) {
	isolate(t)
	noAWSCredentials(t)
	code, out, errOut := runCmd(t, "prices", "--provider", "sim,aws", "--region", "us-east-1", "-o", "json")
	if code != 0 || pricesByRegion(t, out)["sim us-east-1"] == 0 {
		t.Fatalf("prices: exit %d, want 0 with the sim's rows: %s", code, errOut)
	}
	if w := warningLines(errOut, "aws"); len(w) != 1 || !strings.Contains(w[0], "no credentials") {
		t.Errorf("prices: aws warnings %q, want one saying there are no credentials", w)
	}

	code, out, errOut = runCmd(t, "offerings", "--provider", "sim,aws", "--region", "us-east-1", "--gpu", "H100", "--count", "1", "--duration", "2d", "-o", "json")
	if rows, _ := jsonRows(t, out); code != 0 || len(rows) == 0 {
		t.Fatalf("offerings: exit %d, want 0 with the sim's offerings: %s", code, errOut)
	}
	if w := warningLines(errOut, "offerings: aws"); len(w) != 1 || !strings.Contains(w[0], "no credentials") {
		t.Errorf("offerings: aws warnings %q, want one saying there are no credentials", w)
	}

	code, _, errOut = runCmd(t, "prices", "--provider", "aws", "--region", "us-east-1")
	if code != 1 || len(stderrLines(errOut)) != 1 || !strings.HasPrefix(errOut, "gpumarket: aws: no credentials") {
		t.Errorf("aws alone: exit %d, stderr %q; want 1 and its one line", code, errOut)
	}
}
