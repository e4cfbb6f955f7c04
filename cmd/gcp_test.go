package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
)

// gcpRun runs gpumarket with a config file that points the gcp provider
// at the fake: endpoints and a key file whose token_uri is the fake's.
func gcpRun(t *testing.T, f *gcptest.Server) func(args ...string) (int, string, string) {
	t.Helper()
	isolate(t)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	dir := t.TempDir()
	key, err := f.KeyFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, b, m := f.Endpoints()
	cfg := fmt.Sprintf("providers: [gcp]\nbudget: {max_booking_usd: 100000, max_daily_usd: 500000}\n"+
		"gcp:\n  credentials_file: %s\n  image: projects/debian-cloud/global/images/family/debian-12\n"+
		"  endpoints: {compute: %q, billing: %q, monitoring: %q}\n", key, c, b, m)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUMARKET_CONFIG", path)
	return func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
}

// Against the fake, through the real clients and the ledger: prices,
// calendar-mode offerings, a booking, a Spot fleet launched and deleted.
func TestGCPAgainstTheFake(t *testing.T) {
	f := gcptest.New(gcptest.Options{})
	defer f.Close()
	runC := gcpRun(t, f)

	code, out, errOut := runC("prices", "--gpu", "H100", "-o", "json")
	if code != 0 {
		t.Fatalf("prices: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) == 0 {
		t.Fatal("prices: no rows")
	}
	for _, r := range rows {
		if r["cloud"] != "gcp" || r["provider"] != "gcp" || r["spot_usd_hour"] == nil || r["interruption"] != nil || r["effective_usd_gpu_hour"] == nil {
			t.Errorf("prices row %v", r)
		}
	}

	// The plan prices Google's pools with the class prior, and says so.
	code, out, errOut = runC("plan", "--gpu", "H100", "--gpus", "8", "--hours", "6", "--deadline", "+2d", "--region", "us-central1", "--runs", "500", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	plans, _ := jsonRows(t, out)
	said := false
	for _, r := range plans {
		a, _ := r["assumptions"].(string)
		said = said || r["strategy"] == "spot-one-pool" && strings.Contains(a, "H100 prior, no bucket known (Google publishes no interruption rate; Spot VMs get a 30 s preemption notice")
	}
	if !said {
		t.Errorf("no spot plan says it used the H100 prior for want of a Google rate: %v", plans)
	}

	code, out, errOut = runC("offerings", "--gpu", "H100", "--count", "2", "--duration", "2d", "--region", "us-central1", "-o", "json")
	if code != 0 {
		t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
	offs, _ := jsonRows(t, out)
	if len(offs) == 0 || offs[0]["cloud"] != "gcp" || !strings.HasPrefix(offs[0]["id"].(string), "gcpcal-") {
		t.Fatalf("offerings %v", offs)
	}
	id := offs[0]["id"].(string)
	code, out, errOut = runC("book", id, "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("book: exit %d: %s", code, errOut)
	}
	booked, _ := jsonRows(t, out)
	if len(booked) != 1 || booked[0]["kind"] != "gcp-calendar" || booked[0]["state"] != "scheduled" ||
		!strings.Contains(booked[0]["provider_ref"].(string), "/futureReservations/gpumarket-") {
		t.Fatalf("book: %v", booked)
	}

	// A purchase whose answer is lost is unknown, then settled by the
	// reservation's name, never bought twice.
	f.LoseAnswer("futureReservations.insert")
	lost := offs[1]["id"].(string)
	if code, _, errOut = runC("book", lost, "--yes", "-o", "json"); code != 1 {
		t.Fatalf("book with its answer lost: exit %d: %s", code, errOut)
	}
	code, out, errOut = runC("ledger", "-o", "json")
	led, _ := jsonRows(t, out)
	settled := 0
	for _, r := range led {
		if r["kind"] == "gcp-calendar" && r["state"] == "scheduled" {
			settled++
		}
	}
	if code != 0 || settled != 2 {
		t.Fatalf("ledger after a lost answer: exit %d, %v: %s", code, led, errOut)
	}

	code, out, errOut = runC("fleet", "launch", "--region", "us-central1", "--instance-types", "g2-standard-8", "--target", "2", "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("fleet launch: exit %d: %s", code, errOut)
	}
	fleet, _ := jsonRows(t, out)
	if len(fleet) != 1 || fleet[0]["state"] != "active" || len(f.VMs()) != 2 {
		t.Fatalf("fleet launch: %v, VMs %v", fleet, f.VMs())
	}
	code, _, errOut = runC("fleet", "delete", fleet[0]["id"].(string), "--yes", "-o", "json")
	if code != 0 || len(f.VMs()) != 0 {
		t.Fatalf("fleet delete: exit %d, VMs %v: %s", code, f.VMs(), errOut)
	}
	code, out, errOut = runC("ledger", "-o", "json")
	if code != 0 {
		t.Fatalf("ledger: exit %d: %s", code, errOut)
	}
	led, _ = jsonRows(t, out)
	kinds := map[string]string{}
	for _, r := range led {
		kinds[r["kind"].(string)] = r["state"].(string)
	}
	if kinds["gcp-calendar"] != "scheduled" || kinds["fleet"] != "deleted" {
		t.Errorf("ledger %v", led)
	}
}

// No credentials: the same one line the other clouds give, exit 1.
func TestGCPWithoutCredentials(t *testing.T) {
	isolate(t)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("GCE_METADATA_HOST", "")
	code, _, errOut := runCmd(t, "prices", "--provider", "gcp", "--region", "us-central1")
	if code != 1 || len(stderrLines(errOut)) != 1 || !strings.HasPrefix(errOut, "gpumarket: gcp: no credentials") {
		t.Errorf("exit %d, stderr %q; want 1 and one line", code, errOut)
	}
}

// Against the fake: throttling is waited out; an API's refusal (Billing's
// reason in its ErrorInfo detail) and a failed operation are each one
// line on stderr, exit 1, and a failed launch is in the ledger as failed.
func TestGCPFailuresSaidInOneLine(t *testing.T) {
	f := gcptest.New(gcptest.Options{})
	defer f.Close()
	runC := gcpRun(t, f)

	f.Throttle(429, 503, 429)
	if code, _, errOut := runC("prices", "--gpu", "H100", "-o", "json"); code != 0 {
		t.Fatalf("prices while throttled: exit %d: %s", code, errOut)
	}

	f.Fail("services.skus.list", 403, "SERVICE_DISABLED", "Cloud Billing API has not been used in project gpumarket-test before or it is disabled.")
	code, _, errOut := runC("prices", "--gpu", "H100", "-o", "json")
	if code != 1 || saidIn(errOut, "403 SERVICE_DISABLED: Cloud Billing API") != 1 {
		t.Errorf("billing refused: exit %d, stderr %q; want 1 and one line naming the reason", code, errOut)
	}

	f.FailOperation("regionInstances.bulkInsert", "ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'us-central1-a' does not have enough resources available to fulfill the request.\nTry a different zone.")
	code, _, errOut = runC("fleet", "launch", "--region", "us-central1", "--instance-types", "g2-standard-8", "--target", "2", "--yes", "-o", "json")
	if code != 1 || saidIn(errOut, "failed: ZONE_RESOURCE_POOL_EXHAUSTED: The zone") != 1 || strings.Contains(errOut, "Try a different zone") {
		t.Errorf("failed bulk insert: exit %d, stderr %q; want 1 and one line naming the code", code, errOut)
	}
	code, out, errOut := runC("ledger", "-o", "json")
	led, _ := jsonRows(t, out)
	if code != 0 || len(led) != 1 || led[0]["state"] != "failed" {
		t.Errorf("ledger after a failed launch: exit %d, %v: %s", code, led, errOut)
	}
}

// saidIn counts the lines of stderr that say what.
func saidIn(stderr, what string) int {
	n := 0
	for _, l := range stderrLines(stderr) {
		if strings.Contains(l, what) {
			n++
		}
	}
	return n
}
