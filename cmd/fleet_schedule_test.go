package cmd

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

// A schedule that cannot be kept is bad usage, in one line
// naming the flag, before anything is asked or recorded.
func TestFleetScheduleFlagsRefused(t *testing.T) {
	s := newSession(t, "")
	launch := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "g6.xlarge", "--target", "2", "--yes"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--start", "soon"}, `--start "soon": want`},
		{[]string{"--start", ""}, "--start is empty"},
		{[]string{"--start", "2020-01-02 09:00"}, "has passed"},
		{[]string{"--start", "+91d"}, "more than 90 days ahead"},
		{[]string{"--start", time.Now().Add(120 * 24 * time.Hour).UTC().Format(time.RFC3339)}, "at most 90 days ahead"},
		{[]string{"--start", "+1h", "--for", "0"}, `--for "0": want`},
		{[]string{"--for", "3x"}, `--for "3x": want`},
		{[]string{"--for", "2m"}, "from 5m to 90d"},
		{[]string{"--for", "91d"}, "lasts at most 90 days"},
		{[]string{"--for", ""}, "--for is empty"},
	} {
		code, _, errOut := s.run(append(append([]string{}, launch...), c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q in one line", c.args, code, errOut, c.want)
		}
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("rows after refusals: %v", rows)
	}
}

// On the simulated market: `fleet launch --start … --for 3h`
// shows the window in local time and UTC and says gpumarket keeps it,
// records the row scheduled with its window (the ledger's JSON fields
// unchanged, who keeps it in the table's note), launches nothing, and
// `fleet delete` cancels it.
func TestFleetScheduleOnSim(t *testing.T) {
	s := newSession(t, "")
	// The start is given as a local wall-clock time, which names one
	// minute only outside the hour a DST change repeats (01:30 EST is
	// read as the 01:30 EDT an hour before it); and a window across
	// midnight UTC is written with its days ("Wed 21:00 – Thu 00:00
	// UTC"), while the one checked below is within a day. An hour
	// earlier at a time, the start is both.
	const local = "2006-01-02 15:04"
	start := time.Now().Add(26 * time.Hour).Truncate(time.Minute)
	for {
		read, err := time.ParseInLocation(local, start.Format(local), time.Local)
		if err == nil && read.Equal(start) && start.UTC().Hour() < 21 {
			break
		}
		start = start.Add(-time.Hour)
	}
	code, out, errOut := s.run("fleet", "launch", "--region", "us-east-1", "--instance-types", "g6.xlarge", "--target", "30",
		"--start", start.Format(local), "--for", "3h", "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("schedule: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"window     " + start.Format("Mon 01-02 15:04 MST"), start.UTC().Format("15:04") + "–" + start.Add(3*time.Hour).UTC().Format("15:04") + " UTC), 3h",
		"schedule   gpumarket starts and deletes it: a gpumarket TUI or `serve` must be running at those times",
		"dry run", "scheduled: ledger row",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 1 || rows[0]["state"] != "scheduled" || rows[0]["provider_ref"] != nil ||
		rows[0]["start"] != start.UTC().Format(time.RFC3339) || rows[0]["end"] != start.Add(3*time.Hour).UTC().Format(time.RFC3339) {
		t.Fatalf("scheduled row: %v", rows)
	}
	if _, ok := rows[0]["note"]; ok {
		t.Fatalf("the note is for people (the table), not the JSON: %v", rows[0])
	}
	listed, errOut := s.ledger()
	if len(listed) != 1 || listed[0]["state"] != "scheduled" {
		t.Fatalf("after a ledger run (a one-shot command does not launch it): %v\n%s", listed, errOut)
	}
	code, table, errOut := s.run("ledger")
	if code != 0 || !strings.Contains(table, "gpumarket starts and deletes it") || !strings.Contains(errOut, "scheduled "+start.Format("Mon 01-02 15:04 MST")) {
		t.Fatalf("ledger table: exit %d\n%s\n%s", code, table, errOut)
	}
	code, out, errOut = s.run("fleet", "delete", rows[0]["id"].(string), "--yes", "-o", "json")
	deleted, _ := jsonRows(t, out)
	if code != 0 || len(deleted) != 1 || deleted[0]["state"] != "deleted" {
		t.Fatalf("cancel: exit %d %v: %s", code, deleted, errOut)
	}
}

// On the local EC2 endpoint through the CLI: the confirmation
// says AWS keeps the schedule; one dry run, then one CreateFleet of type
// request with ValidFrom, ValidUntil and TerminateInstancesWithExpiration.
func TestFleetScheduleOnFakeEC2(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := newSession(t, "aws: {launch_template: lt-0123}\n")
	testutil.AWSEnv(t, srv.URL)

	code, out, errOut := s.run("fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", "g6.xlarge", "--target", "3",
		"--start", "+26h", "--for", "3h", "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("schedule: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "schedule   AWS starts and ends it at the cloud; it ends on time even if gpumarket is not running") ||
		!strings.Contains(errOut, "scheduled at the cloud: fleet-") {
		t.Errorf("stderr:\n%s", errOut)
	}
	// AWS's dry-run answer starts "dry run:"; the summary's line names it once.
	if !strings.Contains(errOut, "  dry run    AWS says the fleet would launch") || strings.Contains(errOut, "dry run    dry run") {
		t.Errorf("the dry run's line:\n%s", errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 1 || rows[0]["state"] != "scheduled" || rows[0]["provider_ref"] == nil {
		t.Fatalf("row: %v", rows)
	}
	var sent []ec2test.Call
	for _, c := range fake.Calls() {
		if c.Action == "CreateFleet" {
			sent = append(sent, c)
		}
	}
	if len(sent) != 2 || sent[0].Params.Get("DryRun") != "true" || sent[1].Params.Get("DryRun") == "true" {
		t.Fatalf("%d CreateFleet calls, want a dry run, then the launch", len(sent))
	}
	q := sent[1].Params
	from, err1 := time.Parse(time.RFC3339, q.Get("ValidFrom"))
	until, err2 := time.Parse(time.RFC3339, q.Get("ValidUntil"))
	start, _ := time.Parse(time.RFC3339, rows[0]["start"].(string))
	if err1 != nil || err2 != nil || !from.Equal(start.Truncate(time.Second)) || until.Sub(from) != 3*time.Hour ||
		q.Get("TerminateInstancesWithExpiration") != "true" || q.Get("Type") != "request" || q.Get("ClientToken") != rows[0]["id"] {
		t.Fatalf("CreateFleet %v", q)
	}
}
