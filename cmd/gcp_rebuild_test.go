package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/ledger"
)

// A calendar-mode reservation booked and a Spot fleet launched against the
// fake, the ledger deleted: `ledger --rebuild` gives the same rows back
// from what Google shows, every list paged. The fleet's cost is the one
// thing the cloud does not keep (an estimate of its first hour): unknown.
func TestGCPLedgerRebuild(t *testing.T) {
	f := gcptest.New(gcptest.Options{PageSize: 1})
	defer f.Close()
	runC := gcpRun(t, f)

	code, out, errOut := runC("offerings", "--gpu", "H100", "--count", "2", "--duration", "2d", "--region", "us-central1", "-o", "json")
	offs, _ := jsonRows(t, out)
	if code != 0 || len(offs) == 0 {
		t.Fatalf("offerings: exit %d, %v: %s", code, offs, errOut)
	}
	if code, _, errOut = runC("book", offs[0]["id"].(string), "--yes", "-o", "json"); code != 0 {
		t.Fatalf("book: exit %d: %s", code, errOut)
	}
	if code, _, errOut = runC("fleet", "launch", "--region", "us-central1", "--instance-types", "g2-standard-8", "--target", "2", "--yes", "-o", "json"); code != 0 {
		t.Fatalf("fleet launch: exit %d: %s", code, errOut)
	}
	code, out, errOut = runC("ledger", "-o", "json")
	before, _ := jsonRows(t, out)
	if code != 0 || len(before) != 2 {
		t.Fatalf("ledger: exit %d, %v: %s", code, before, errOut)
	}

	dir, err := config.DataDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, ledger.FileName+ext)); err != nil && ext == "" {
			t.Fatal(err)
		}
	}
	code, out, errOut = runC("ledger", "--rebuild", "--provider", "gcp", "-o", "json")
	after, _ := jsonRows(t, out)
	if code != 0 || len(after) != 2 || !strings.Contains(errOut, "re-created 2 row") {
		t.Fatalf("rebuild: exit %d, %v: %s", code, after, errOut)
	}
	byID := map[string]map[string]any{}
	for _, r := range after {
		byID[r["id"].(string)] = r
	}
	for _, was := range before {
		now, ok := byID[was["id"].(string)]
		if !ok {
			t.Errorf("row %v not re-created under its id (rebuilt: %v)", was, after)
			continue
		}
		for _, k := range []string{"kind", "provider", "cloud", "region", "instance_type", "instance_count", "gpu_count", "end", "state", "provider_ref", "actor"} {
			if now[k] != was[k] {
				t.Errorf("%s %s: %v after the rebuild, %v before", was["kind"], k, now[k], was[k])
			}
		}
		at := func(r map[string]any, k string) time.Time {
			v, _ := time.Parse(time.RFC3339Nano, r[k].(string))
			return v
		}
		switch was["kind"] {
		case "fleet":
			// The ledger's start is when the launch was answered; the
			// cloud's, the first VM's creation (to the second), after the
			// row's intent was written.
			if s := at(now, "start"); s.Before(at(was, "created_at").Truncate(time.Second)) || s.After(at(was, "start")) {
				t.Errorf("fleet start %v after the rebuild; before, created %v and started %v", now["start"], was["created_at"], was["start"])
			}
			if now["cost_usd"] != nil || !strings.HasPrefix(now["zone"].(string), "us-central1-") {
				t.Errorf("rebuilt fleet %v: want its cost unknown and its zones", now)
			}
		default:
			for _, k := range []string{"zone", "start", "cost_usd"} {
				if now[k] != was[k] {
					t.Errorf("%s %s: %v after the rebuild, %v before", was["kind"], k, now[k], was[k])
				}
			}
			// The cloud dates the reservation when the purchase call came,
			// after the intent (by the lookups before it: seconds, under -race).
			if c, w := at(now, "created_at"), at(was, "created_at").Truncate(time.Second); c.Before(w) || c.After(w.Add(time.Minute)) {
				t.Errorf("%s created_at: %v after the rebuild, %v before", was["kind"], now["created_at"], was["created_at"])
			}
		}
	}
	if f.Calls["futureReservations.aggregatedList"] < 2 || f.Calls["instances.aggregatedList"] < 2 {
		t.Errorf("lists not paged: %v", f.Calls)
	}
	if code, _, errOut = runC("ledger", "--rebuild", "--provider", "gcp"); code != 0 || !strings.Contains(errOut, "re-created 0 row(s); 2 already") {
		t.Errorf("rebuild again: exit %d: %s", code, errOut)
	}
}
