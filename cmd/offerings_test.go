package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// finderFake is a provider that sells capacity blocks and answers every
// search with err (a refusal of the terms, a failure).
type finderFake struct {
	name string
	err  error
}

func (f finderFake) Name() string { return f.name }
func (f finderFake) Describe() domain.Descriptor {
	return domain.Descriptor{Name: f.name, Sells: []*domain.BookingTerms{domain.CapacityBlockTerms}}
}
func (f finderFake) Fetch(context.Context, domain.FetchRequest, domain.Sink) error { return nil }
func (f finderFake) FindOfferings(context.Context, domain.OfferingQuery) ([]domain.Offering, error) {
	return nil, f.err
}

// withFinder is the default table plus the fake.
func withFinder(f finderFake) app.Table {
	return append(app.DefaultTable(), app.Row{Desc: f.Describe(),
		Build: func(context.Context, *app.Settings) (domain.Provider, error) { return f, nil }})
}

// stderrLines splits stderr into its lines.
func stderrLines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Bad search terms are said once, naming the flag where the CLI can tell,
// and exit 2; a --start-after in the past is refused.
func TestOfferingsBadTermsSaidOnceExit2(t *testing.T) {
	now := time.Now()
	far := now.Add(100 * 24 * time.Hour).Format("2006-01-02")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--start-before", "2025-01-01"}, "gpumarket: --start-before 2025-01-01 is in the past"},
		{[]string{"--start-after", far}, "gpumarket: --start-after " + far + " is too far ahead: blocks are sold to start at most 8w ahead"},
		{[]string{"--start-after", "+91d"}, `gpumarket: --start-after "+91d" is more than 90 days ahead`},
		{[]string{"--start-after", "soon"}, `gpumarket: --start-after "soon": want a local time (YYYY-MM-DD HH:MM`},
		{[]string{"--gpu", "L4"}, "gpumarket: offerings: sim: GPU L4: the simulated market sells blocks of H100, H200, A100 only"},
	} {
		args := append([]string{"offerings", "--gpu", "H100", "--count", "2", "--duration", "2d"}, c.args...)
		code, out, errOut := runCmd(t, args...)
		lines := stderrLines(errOut)
		if code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line %q", c.args, code, out, errOut, c.want)
		}
	}

	// A start in the past is a typo, not "from now": refused, named.
	past := now.Add(-48 * time.Hour).Format("2006-01-02")
	code, out, errOut := runCmd(t, "offerings", "--gpu", "H100", "--count", "1", "--duration", "2d", "--start-after", past, "-o", "json")
	if code != 2 || out != "" || !strings.Contains(errOut, "gpumarket: --start-after "+past+" is ") || !strings.Contains(errOut, "in the past (it is ") {
		t.Fatalf("a start in the past: exit %d: %s", code, errOut)
	}
}

// Every provider in use refusing the terms: each refusal once, on its own
// line, exit 2. A provider that fails otherwise makes it exit 1.
func TestOfferingsEveryProviderRefusingSaysEachOnce(t *testing.T) {
	isolate(t)
	refusing := finderFake{name: "acme", err: domain.InvalidQueryf("GPU L4: acme sells blocks of H100 only")}
	code, out, errOut := runTable(t, withFinder(refusing), "offerings", "--provider", "sim,acme", "--gpu", "L4", "--count", "1", "--duration", "2d")
	lines := stderrLines(errOut)
	want := []string{ // in the order of --provider
		"gpumarket: offerings: sim: GPU L4: the simulated market sells blocks of H100, H200, A100 only",
		"gpumarket: offerings: acme: GPU L4: acme sells blocks of H100 only",
	}
	if code != 2 || out != "" || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s", code, errOut, strings.Join(want, "\n"))
	}

	broken := finderFake{name: "acme", err: errors.New("acme: describe offerings: 500 Internal Server Error\nacme: second region: 503")}
	code, _, errOut = runTable(t, withFinder(broken), "offerings", "--provider", "sim,acme", "--gpu", "L4", "--count", "1", "--duration", "2d")
	lines = stderrLines(errOut)
	if code != 1 || len(lines) != 3 || lines[1] != "gpumarket: offerings: acme: describe offerings: 500 Internal Server Error" ||
		lines[2] != "gpumarket: offerings: acme: second region: 503" {
		t.Errorf("a failure beside a refusal: exit %d, stderr:\n%s\nwant exit 1, one line per line of each error", code, errOut)
	}
}

// One provider failing leaves the others' offerings: printed, with one
// warning line per failure, exit 0.
func TestOfferingsPrintsOthersWhenAProviderFails(t *testing.T) {
	isolate(t)
	broken := finderFake{name: "acme", err: fmt.Errorf("acme: describe offerings in r1: %w", errors.New("connection refused"))}
	code, out, errOut := runTable(t, withFinder(broken), "offerings", "--provider", "sim,acme", "--gpu", "H100", "--count", "1", "--duration", "2d", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if rows, _ := jsonRows(t, out); len(rows) == 0 || rows[0]["provider"] != "sim" {
		t.Errorf("rows %v, want the simulated market's", rows)
	}
	if w := warningLines(errOut, "offerings: acme"); len(w) != 1 || w[0] != "gpumarket: warning: offerings: acme: describe offerings in r1: connection refused" {
		t.Errorf("warnings %q, want one naming the failed provider and its cause\nstderr: %s", w, errOut)
	}
}

// The table shows an offering's start and end in local time with the
// zone, as the TUI does; JSON keeps RFC 3339 UTC.
func TestOfferingsTableShowsLocalTimes(t *testing.T) {
	s := newSession(t, "")
	rows := s.search()
	start, err := time.Parse(time.RFC3339, rows[0]["start"].(string))
	if err != nil || !strings.HasSuffix(rows[0]["start"].(string), "Z") {
		t.Fatalf("JSON start %v: want RFC 3339 UTC (%v)", rows[0]["start"], err)
	}
	code, out, errOut := s.run("offerings", "--gpu", "H100", "--count", "1", "--duration", "48h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := start.Local().Format("2006-01-02 15:04 MST")
	if !strings.Contains(out, want) || strings.Contains(out, rows[0]["start"].(string)) {
		t.Errorf("table:\n%s\nwant the start as %q, not %s", out, want, rows[0]["start"])
	}
}

// The CLI reads a local wall-clock time as the TUI does (it once
// refused "2026-12-02T09:00" with exit 2).
func TestOfferingsReadsLocalTimes(t *testing.T) {
	day := time.Now().Add(72 * time.Hour).Format("2006-01-02")
	for _, after := range []string{day + "T09:00", day + " 09:00"} {
		code, out, errOut := runCmd(t, "offerings", "--gpu", "H100", "--count", "1", "--duration", "2d", "--start-after", after, "-o", "json")
		if code != 0 {
			t.Fatalf("--start-after %q: exit %d: %s", after, code, errOut)
		}
		at, _ := time.ParseInLocation("2006-01-02 15:04", day+" 09:00", time.Local)
		rows, _ := jsonRows(t, out)
		blocks := 0
		for _, r := range rows {
			// (The simulated Azure reservations start when made, whatever
			// the start asked: the providers' side.)
			if r["cloud"] != "aws" {
				continue
			}
			blocks++
			if start, _ := time.Parse(time.RFC3339, r["start"].(string)); start.Before(at) {
				t.Errorf("--start-after %q: a block starts at %v", after, start)
			}
		}
		if blocks == 0 {
			t.Fatalf("--start-after %q found no block", after)
		}
	}
}

// The same bad terms against AWS (its local EC2 endpoint): said once,
// exit 2, and no search is sent.
func TestOfferingsBadTermsOnAWSSaidOnceExit2(t *testing.T) {
	isolate(t)
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-26*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	table := withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	})
	far := now.Add(100 * 24 * time.Hour).Format("2006-01-02")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--start-before", "2025-01-01"}, "gpumarket: --start-before 2025-01-01 is in the past"},
		{[]string{"--start-after", far}, "gpumarket: --start-after " + far + " is too far ahead"},
		{[]string{"--duration", "30h"}, "gpumarket: --duration 30h: capacity blocks last 1 to 14 days"},
		{[]string{"--count", "65"}, "gpumarket: --count 65: aws sells blocks of 1 to 64 instances"},
	} {
		args := append([]string{"offerings", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100", "--count", "2", "--duration", "2d"}, c.args...)
		code, out, errOut := runTable(t, table, args...)
		lines := stderrLines(errOut)
		if code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line %q", c.args, code, errOut, c.want)
		}
	}
	if n := fake.Count("DescribeCapacityBlockOfferings", ""); n != 0 {
		t.Errorf("%d searches sent for refused terms", n)
	}
}
