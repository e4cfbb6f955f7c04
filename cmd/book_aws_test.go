package cmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
)

// stallPurchases wraps the fake EC2 endpoint: while stall is set, a real
// (not dry-run) PurchaseCapacityBlock is carried out but its answer is
// held until the caller gives up — a purchase whose answer never comes.
func stallPurchases(fake *ec2test.Server, stall *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall.Load() && r.Method == http.MethodPost {
			if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == "PurchaseCapacityBlock" && r.PostForm.Get("DryRun") != "true" {
				fake.ServeHTTP(httptest.NewRecorder(), r)
				<-r.Context().Done()
				return
			}
		}
		fake.ServeHTTP(w, r)
	})
}

// TestBookAgainstFakeEC2 books a block against the EC2
// endpoint of cloud/aws/ec2test on loopback.
func TestBookAgainstFakeEC2(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...)
	var stall atomic.Bool
	srv := httptest.NewServer(stallPurchases(fake, &stall))
	defer srv.Close()

	s := newSession(t, "budget: {max_booking_usd: 1000000, max_daily_usd: 5000000}\n")
	testutil.AWSEnv(t, srv.URL)

	search := func(duration string, min int) []map[string]any {
		t.Helper()
		code, out, errOut := s.run("offerings", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100", "--count", "1", "--duration", duration, "-o", "json")
		if code != 0 {
			t.Fatalf("offerings: exit %d: %s", code, errOut)
		}
		rows, _ := jsonRows(t, out)
		if len(rows) < min {
			t.Fatalf("want %d offerings at least, got %v (%s)", min, rows, errOut)
		}
		return rows
	}
	purchases := func() (real, dry int) {
		for _, c := range fake.Calls() {
			if c.Action == "PurchaseCapacityBlock" {
				if c.Params.Get("DryRun") == "true" {
					dry++
				} else {
					real++
				}
			}
		}
		return
	}
	offers := search("2d", 2)
	id := offers[0]["id"].(string)
	if !strings.HasPrefix(id, "cb-") {
		t.Fatalf("offering id %q", id)
	}

	// --dry-run sends exactly one PurchaseCapacityBlock, with DryRun.
	code, out, errOut := s.run("book", id, "--dry-run")
	if code != 0 || !strings.Contains(out, "would succeed") {
		t.Fatalf("dry run: exit %d: %s %s", code, out, errOut)
	}
	if r, d := purchases(); r != 0 || d != 1 {
		t.Fatalf("after the dry run: %d purchases, %d dry runs", r, d)
	}

	// --yes sends exactly one, and the ledger lists its id, cost and dates.
	code, _, errOut = s.run("book", id, "--yes")
	if code != 0 {
		t.Fatalf("book: exit %d: %s", code, errOut)
	}
	if r, d := purchases(); r != 1 || d != 1 {
		t.Fatalf("after the purchase: %d purchases, %d dry runs", r, d)
	}
	res := fake.Reservations()
	if len(res) != 1 {
		t.Fatalf("reservations at the fake: %+v", res)
	}
	rows, _ := s.ledger()
	if len(rows) != 1 || rows[0]["provider_ref"] != res[0].ID || rows[0]["committed_usd"] != offers[0]["upfront_usd"] ||
		rows[0]["start"] != offers[0]["start"] || rows[0]["end"] != offers[0]["end"] || rows[0]["state"] != "scheduled" {
		t.Fatalf("ledger %v\nreservation %+v\noffer %v", rows, res[0], offers[0])
	}

	// A purchase whose answer does not come within --timeout is left
	// unknown and not re-sent; a later `ledger` finds it.
	id2 := offers[1]["id"].(string)
	stall.Store(true)
	code, _, errOut = s.run("book", id2, "--provider", "aws", "--region", "us-east-1", "--yes", "--timeout", "2s")
	stall.Store(false)
	if code != 1 || !strings.Contains(errOut, "outcome unknown") || !strings.Contains(errOut, "NOT retried") {
		t.Fatalf("stalled purchase: exit %d: %s", code, errOut)
	}
	code, _, errOut = s.run("book", id2, "--provider", "aws", "--region", "us-east-1", "--yes")
	if code != 1 || !strings.Contains(errOut, "unknown outcome") {
		t.Fatalf("retry of an unknown purchase: exit %d: %s", code, errOut)
	}
	if r, _ := purchases(); r != 2 {
		t.Fatalf("%d purchases sent, want 2 (never re-sent)", r)
	}
	rows, errOut = s.ledger()
	if len(rows) != 2 || rows[0]["state"] != "scheduled" || rows[0]["provider_ref"] == nil || !strings.Contains(errOut, "reconciled") {
		t.Fatalf("after reconciliation: %v\n%s", rows, errOut)
	}
	if got := fake.Reservations(); len(got) != 2 || rows[0]["provider_ref"] != got[1].ID {
		t.Fatalf("reconciled ref %v, reservations %+v", rows[0]["provider_ref"], got)
	}
	if r, _ := purchases(); r != 2 {
		t.Fatalf("%d purchases sent after reconciliation, want 2", r)
	}

	// Over budget.max_booking_usd: refused before any purchase call.
	before, _ := purchases()
	s = newSession(t, "budget: {max_booking_usd: 10}\n")
	// (The fake sells each block once: both 2-day blocks are gone.)
	offers = search("3d", 1)
	code, _, errOut = s.run("book", offers[0]["id"].(string), "--provider", "aws", "--region", "us-east-1", "--yes")
	if code != 1 || !strings.Contains(errOut, "max_booking_usd $10.00") {
		t.Fatalf("over budget: exit %d: %s", code, errOut)
	}
	if after, _ := purchases(); after != before {
		t.Fatalf("a purchase was sent over budget (%d → %d)", before, after)
	}
}

// gatewayErrorOnPurchase wraps the fake EC2 endpoint: while on is set, a
// real PurchaseCapacityBlock is carried out but the caller gets what a
// load balancer or proxy says when the answer is lost on its way back: a
// 5xx with no EC2 error body.
func gatewayErrorOnPurchase(fake *ec2test.Server, on *atomic.Bool, status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if on.Load() && r.Method == http.MethodPost {
			if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == "PurchaseCapacityBlock" && r.PostForm.Get("DryRun") != "true" {
				fake.ServeHTTP(httptest.NewRecorder(), r)
				w.WriteHeader(status)
				w.Write([]byte(body))
				return
			}
		}
		fake.ServeHTTP(w, r)
	})
}

// TestBookGatewayErrorIsUnknown: the SDK reads a 5xx answer without an EC2
// error document as the code "UnknownError". The purchase may well have
// been made (here it was), so the row must be "unknown" and reconciled —
// not "failed", which would free the offering for a second purchase.
func TestBookGatewayErrorIsUnknown(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{{http.StatusBadGateway, ""}, {http.StatusGatewayTimeout, "<html><body><h1>504 Gateway Time-out</h1></body></html>"}} {
		now := time.Now().UTC().Truncate(time.Minute)
		fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...)
		var on atomic.Bool
		srv := httptest.NewServer(gatewayErrorOnPurchase(fake, &on, c.status, c.body))
		s := newSession(t, "")
		testutil.AWSEnv(t, srv.URL)

		code, out, errOut := s.run("offerings", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100", "--count", "1", "--duration", "2d", "-o", "json")
		if code != 0 {
			t.Fatalf("offerings: exit %d: %s", code, errOut)
		}
		offers, _ := jsonRows(t, out)
		if len(offers) == 0 {
			t.Fatal("no offerings")
		}
		id := offers[0]["id"].(string)
		purchases := func() (n int) {
			for _, call := range fake.Calls() {
				if call.Action == "PurchaseCapacityBlock" && call.Params.Get("DryRun") != "true" {
					n++
				}
			}
			return n
		}

		on.Store(true)
		code, _, errOut = s.run("book", id, "--yes")
		on.Store(false)
		if code != 1 || !strings.Contains(errOut, "outcome unknown") {
			t.Fatalf("%d answer: exit %d, want 1 and an unknown outcome: %s", c.status, code, errOut)
		}
		// Running the command again must not send a second purchase.
		code, _, errOut = s.run("book", id, "--yes")
		if code == 0 || purchases() != 1 {
			t.Fatalf("%d answer, then book again: exit %d, %d purchases sent (want 1): %s", c.status, code, purchases(), errOut)
		}
		rows, errOut := s.ledger()
		if len(rows) != 1 || rows[0]["state"] != "scheduled" || rows[0]["provider_ref"] != fake.Reservations()[0].ID {
			t.Fatalf("%d answer: ledger after reconciliation %v\n%s", c.status, rows, errOut)
		}
		srv.Close()
	}
}

// TestLedgerReleasesReservationsOfOtherProviders: a reservation bills
// until released, so `gpumarket ledger` reaches the provider of one whose
// window has ended even when this run's --provider names another, and
// releases it; it never records it ended without that.
func TestLedgerReleasesReservationsOfOtherProviders(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := newSession(t, "")
	testutil.AWSEnv(t, srv.URL)

	// A simulated Azure reservation (the sim releases reservations as
	// Azure needs them released) whose window ended an hour ago.
	st, err := ledger.Open(os.Getenv("GPUMARKET_DATA_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	row, err := st.RecordIntent(context.Background(), ledger.Entry{Kind: ledger.KindReservation, Provider: "sim", Cloud: "azure",
		Region: "eastus", InstanceType: "Standard_ND96isr_H100_v5", InstanceCount: 1, GPUCount: 8,
		Start: now.Add(-25 * time.Hour), End: now.Add(-time.Hour), CostUSD: 2400, State: ledger.StateActive,
		ProviderRef: "/subscriptions/0/resourceGroups/g/providers/Microsoft.Compute/capacityReservationGroups/x/capacityReservations/y",
		IdemKey:     "azcr-0123456789abcdef", CreatedAt: now.Add(-26 * time.Hour)}, nil)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := s.run("ledger", "--provider", "aws", "--region", "us-east-1", "-o", "json")
	if code != 0 {
		t.Fatalf("ledger: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 1 || rows[0]["id"] != row.ID || rows[0]["state"] != "ended" {
		t.Fatalf("a reservation past its window should be released and ended: %v\n%s", rows, errOut)
	}
	if !strings.Contains(errOut, "released "+row.ID) {
		t.Fatalf("the release should be said: %s", errOut)
	}
}
