package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/watch"
)

// A spot rule the simulated market always meets (above a cent) and one
// it never does (below a cent).
const (
	alwaysRule = `  - name: always
    spot: {instance_type: p5.48xlarge, region: us-east-1, above_usd_hour: 0.01}
`
	neverRule = `  - name: never
    spot: {instance_type: p5.48xlarge, region: us-east-1, below_usd_hour: 0.01}
`
)

func TestWatchOnceExitCodes(t *testing.T) {
	s := newSession(t, "watch:\n"+neverRule)
	code, out, errOut := s.run("watch", "--once")
	if code != 0 || out != "" {
		t.Fatalf("no alert: exit %d, stdout %q, stderr %s; want 0 and nothing", code, out, errOut)
	}

	s = newSession(t, "watch:\n"+alwaysRule+neverRule)
	code, out, errOut = s.run("watch", "--once")
	if code != exitFired {
		t.Fatalf("an alert: exit %d, want %d; stderr %s", code, exitFired, errOut)
	}
	// One line per alert, on stdout.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], " alert always: spot p5.48xlarge in us-east-1") || !strings.Contains(lines[0], "SIMULATED") {
		t.Errorf("stdout %q, want one alert line", out)
	}
	// The crossing was told: the next run (cron, five minutes later)
	// tells nothing and exits 0.
	code, out, errOut = s.run("watch", "--once")
	if code != 0 || out != "" {
		t.Errorf("second run: exit %d, stdout %q, stderr %s; want 0 and nothing", code, out, errOut)
	}
}

func TestWatchRefusesBadRules(t *testing.T) {
	cases := []struct {
		name, config string
		want         []string
	}{
		{"unknown GPU", "watch:\n  - name: x\n    block: {gpu: H900, gpus: 16, hours: 48}\n", []string{":3:13:", "unknown GPU \"H900\"", "H100"}},
		{"never true", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-east-1, below_usd_hour: 0}\n", []string{":3:59:", "never fire"}},
		{"start_before before start_after", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 24, start_after: 2026-12-05, start_before: 2026-12-03}\n", []string{"start_before", "not after"}},
		// The descriptors are asked: the sim has no such region.
		{"region no provider knows", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: mars-north-1, below_usd_hour: 3}\n",
			[]string{":3:40:", "watch[0].spot.region", "none of the providers in use (sim) knows", "us-east-1"}},
		{"block length nobody sells", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 5000}\n", []string{"block.hours"}},
		{"provider not in use", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-east-1, provider: aws, below_usd_hour: 3}\n",
			[]string{":3:59:", "spot.provider", "not in use"}},
		{"tell an unset webhook", "watch:\n  - name: x\n    starts_in: {within: 1h}\n    tell: [webhook]\n", []string{":4:12:", "notify.webhook is not set"}},
		{"no rules", "budget: {max_booking_usd: 10}\n", []string{"no watch rules", "README"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(t, c.config)
			code, _, errOut := s.run("watch", "--once")
			if code != exitUsage || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q: want 2 and one line", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
	// The TUI and serve refuse them too, before anything starts.
	s := newSession(t, "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: mars-north-1, below_usd_hour: 3}\n")
	if code, _, errOut := s.run("serve", "--authorized-keys", "/dev/null", "--listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(errOut, "spot.region") {
		t.Errorf("serve: exit %d, %q", code, errOut)
	}
}

// A rule of the data dir's rules file that breaks is placed there.
func TestWatchRulesFileError(t *testing.T) {
	s := newSession(t, "")
	dir := os.Getenv("GPUMARKET_DATA_DIR")
	os.MkdirAll(dir, 0o700)
	path := filepath.Join(dir, watch.RulesFileName)
	os.WriteFile(path, []byte("watch:\n  - name: far\n    spot: {instance_type: p5.48xlarge, region: mars-north-1, below_usd_hour: 3}\n"), 0o600)
	code, _, errOut := s.run("watch", "--once")
	if code != exitUsage || !strings.Contains(errOut, path+":3:40:") {
		t.Errorf("exit %d, %q: want 2 at %s:3:40", code, errOut, path)
	}
}

// SIGTERM: the delivery in flight finishes, then watch exits 0.
func TestWatchSIGTERMFinishesDeliveries(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var mu sync.Mutex
	var got []byte
	var answered time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		started <- struct{}{}
		<-release
		mu.Lock()
		got, answered = body, time.Now()
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	newSession(t, fmt.Sprintf("watch:\n%snotify:\n  webhook: {url: %q, timeout: 30s}\n", alwaysRule, srv.URL+"/T000/B000/XXX"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	type result struct {
		code int
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		code := run(ctx, []string{"watch"}, strings.NewReader(""), &out, &errOut)
		done <- result{code, time.Now()}
	}()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("watch ended (exit %d) before telling: %s", r.code, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("no POST within a minute")
	}
	cancel() // SIGTERM, with the POST in flight
	select {
	case r := <-done:
		t.Fatalf("watch exited (%d) with the delivery in flight", r.code)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	r := <-done
	mu.Lock()
	defer mu.Unlock()
	if r.code != 0 || r.at.Before(answered) {
		t.Fatalf("exit %d at %s, answered at %s: want 0 after the answer; stderr %s", r.code, r.at, answered, errOut.String())
	}
	if !bytes.Contains(got, []byte(`"text":"spot p5.48xlarge in us-east-1`)) || !strings.Contains(out.String(), "alert always:") {
		t.Errorf("POSTed %s; stdout %q", got, out.String())
	}
	if strings.Contains(errOut.String(), "XXX") {
		t.Errorf("the log shows the webhook's secret: %s", errOut.String())
	}
	st, err := watch.OpenState(os.Getenv("GPUMARKET_DATA_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Recent(context.Background(), 5)
	if err != nil || len(recs) != 1 || len(recs[0].Deliveries) != 1 || recs[0].Deliveries[0].State != watch.DeliveryDone {
		t.Errorf("state after SIGTERM: %+v %v, want the delivery done", recs, err)
	}
}

// Over SSH: a booker's a on a Market row makes a rule; the server's one
// evaluator raises its alert once, and every session — the viewer's too
// — rings the bell and shows the badge.
func TestServeSessionsShareOneWatch(t *testing.T) {
	viewer, vline := testutil.SSHKey(t, "", "attendee")
	booker, bline := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "organizer")
	srv := startServe(t, vline+"\n"+bline+"\n")
	v := sshTerm(t, srv.addr, viewer, 120, 40)
	v.WaitText(t, "sort effective")
	b := sshTerm(t, srv.addr, booker, 120, 40)
	b.WaitText(t, "sort effective")
	if !strings.Contains(v.Text(), "Alerts") {
		t.Fatalf("no Alerts tab:\n%s", v.Text())
	}
	v.Press(t, "a")
	v.WaitText(t, "only a booker may make alert rules")

	// Below $1000/h: every spot price is, so it fires at the next tick.
	b.Press(t, "a")
	b.WaitText(t, "alert when spot")
	b.Press(t, strings.Repeat("\x7f", 12)+"1000\r")
	b.WaitText(t, "saved in")
	for _, s := range []*testutil.Term{v, b} {
		s.WaitText(t, "1 new alert")
		// The bell may reach the client in a later write than the
		// badge's frame: wait for it, then make sure no second one comes.
		for deadline := time.Now().Add(serveWait); bareBells(s.Raw()) == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if n := bareBells(s.Raw()); n != 1 {
			t.Errorf("%d bells in the session's output, want 1", n)
		}
	}
	st, err := watch.OpenState(srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Recent(context.Background(), 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("the server raised %d alerts (%v), want 1 for two sessions", len(recs), err)
	}
	data, _ := os.ReadFile(filepath.Join(srv.dataDir, watch.RulesFileName))
	if !strings.Contains(string(data), "made_by: ssh:SHA256:") || !strings.Contains(string(data), "organizer") {
		t.Errorf("rules file:\n%s", data)
	}
}

// oscRE matches an OSC sequence (the window title), which BEL may end.
var oscRE = regexp.MustCompile("\x1b\\][^\x07\x1b]*(\x07|\x1b\\\\)")

// bareBells counts the BELs that ring: those outside OSC sequences.
func bareBells(s string) int { return strings.Count(oscRE.ReplaceAllString(s, ""), "\a") }
