package cmd

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
)

// Tests of the money path through the command: damaged ledgers, priced
// fleets, types of another cloud, fleets without a launch template.

// TestDamagedLedgerRefusedAndRebuilt: a ledger cut short (a copy
// interrupted, a disk that filled) was refused with SQLite's "database
// disk image is malformed (11)" alone — no word of how to get out — and
// `ledger --rebuild` could not set it aside, so no command worked again
// until the user found the file. It is refused as an unreadable ledger
// (left as it is, the way out named), and --rebuild keeps it aside and
// re-creates the rows from the cloud.
func TestDamagedLedgerRefusedAndRebuilt(t *testing.T) {
	a := newAcme(t)
	a.search()
	if code, _, errOut := a.run("book", "acme-1", "--yes"); code != 0 {
		t.Fatalf("book: %s", errOut)
	}
	before := a.ledger()
	path := filepath.Join(a.dir, ledger.FileName)
	// A checkpointed file, as a backup copy of it would be.
	if code, _, errOut := a.run("ledger"); code != 0 {
		t.Fatalf("ledger: %s", errOut)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(path + ext)
	}
	cut := whole[:len(whole)/2]
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ledger"}, {"book", "acme-1", "--yes"}} {
		code, _, errOut := a.run(args...)
		if code != 1 || !strings.Contains(errOut, "damaged") || !strings.Contains(errOut, "ledger --rebuild") {
			t.Errorf("%v on a damaged ledger: exit %d: %s", args, code, errOut)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(cut) {
		t.Fatalf("the damaged ledger was changed: %v", err)
	}
	if a.fake.Calls("Book") != 1 {
		t.Fatal("bought again")
	}
	code, out, errOut := a.run("ledger", "--rebuild", "--provider", "acme", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 || rows[0]["id"] != before[0]["id"] || !strings.Contains(errOut, "kept aside") {
		t.Fatalf("rebuild: exit %d, rows %v: %s", code, rows, errOut)
	}
	// Its -wal and -shm go with it, under the same name.
	aside, _ := filepath.Glob(path + ".unreadable-*[0-9]Z")
	if len(aside) != 1 {
		t.Fatalf("the damaged ledger was not kept aside: %v", aside)
	}
	if got, err := os.ReadFile(aside[0]); err != nil || string(got) != string(cut) {
		t.Fatalf("what was kept aside is not the damaged file: %v", err)
	}
}

// awsEndpointSession is a session, with a config, whose AWS is the fake EC2 endpoint on loopback.
func awsEndpointSession(t *testing.T, config string) (*session, *ec2test.Server) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	s := newSession(t, config)
	testutil.AWSEnv(t, srv.URL)
	return s, fake
}

// TestAWSFleetWithOnDemandBaseIsPriced: `fleet launch --provider aws
// --on-demand-base 1` said "Estimated cost: unknown (unknown prices: no
// on-demand price in us-east-1 …)" and, under the default budget caps,
// refused every such fleet ("pass a max price", which bounds only the
// spot part) — the estimate's fetch came after the check of which types
// the region sells, and the provider did not describe its pools again.
// The estimate has the on-demand price, and the fleet launches.
func TestAWSFleetWithOnDemandBaseIsPriced(t *testing.T) {
	s, fake := awsEndpointSession(t, "aws: {launch_template: lt-0123456789abcdef0}\n")
	code, _, errOut := s.run("fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", "g6.xlarge",
		"--target", "2", "--on-demand-base", "1", "--dry-run")
	if code != 0 || !strings.Contains(errOut, "/h on-demand, g6.xlarge") || strings.Contains(errOut, "unknown") {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	code, out, errOut := s.run("fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", "g6.xlarge",
		"--target", "2", "--on-demand-base", "1", "--for", "3h", "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("launch under the default caps: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	od := fake.Region("us-east-1").OnDemand["g6.xlarge"]
	if c, ok := rows[0]["committed_usd"].(float64); len(rows) != 1 || !ok || c < 3*od {
		t.Fatalf("ledger row %v: want 3 hours of at least the on-demand $%v committed", rows, od)
	}
	if n := len(fake.Fleets()); n != 1 {
		t.Fatalf("%d fleets at the fake", n)
	}
}

// TestOtherCloudsTypeNamesWhatThisCloudHas: `fleet launch --region
// eastus --instance-types g6.xlarge` answered "(Azure L4 types:
// Standard_NC12s_v3, Standard_NC16as_T4_v3, Standard_NC24ads_A100_v4)" —
// a V100, a T4 and an A100 size, none an L4: Azure has no L4 size. The
// refusal says the cloud has none of that GPU and names some it has.
func TestOtherCloudsTypeNamesWhatThisCloudHas(t *testing.T) {
	code, _, errOut := runCmd(t, "fleet", "launch", "--target", "1", "--dry-run", "--region", "eastus", "--instance-types", "g6.xlarge")
	if code != 2 || strings.Contains(errOut, "Azure L4 types") || !strings.Contains(errOut, "Azure has no L4 type") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Where the cloud has the GPU, its types of that GPU are named.
	code, _, errOut = runCmd(t, "fleet", "launch", "--target", "1", "--dry-run", "--region", "eastus", "--instance-types", "p4d.24xlarge")
	if code != 2 || !strings.Contains(errOut, "Azure A100 types: Standard_NC") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestFleetWithoutLaunchTemplateIsBadUsageFirst: an AWS fleet needs a
// launch template (config aws.launch_template or --launch-template); one
// missing is the config's or the flags' to fix: exit 2, one line, before
// any estimate or call (it was exit 1, after the estimate).
func TestFleetWithoutLaunchTemplateIsBadUsageFirst(t *testing.T) {
	s, fake := awsEndpointSession(t, "")
	code, _, errOut := s.run("fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", "g6.xlarge",
		"--target", "2", "--dry-run")
	if lines := stderrLines(errOut); code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "launch template") || strings.Contains(errOut, "Estimated cost") {
		t.Fatalf("exit %d: %s; want exit 2 and one line about the launch template, before any estimate", code, errOut)
	}
	if n := fake.Count("CreateFleet", ""); n != 0 {
		t.Errorf("%d CreateFleet calls for a fleet refused before any call", n)
	}
}
