package watch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

// hook is a local webhook that answers with the statuses given, in
// order (the last repeats), and keeps every body it got.
type hook struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int
	bodies   [][]byte
	delay    func(n int) time.Duration
}

func newHook(t *testing.T, statuses ...int) *hook {
	h := &hook{statuses: statuses}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		n := len(h.bodies)
		h.bodies = append(h.bodies, body)
		status := h.statuses[min(n, len(h.statuses)-1)]
		delay := h.delay
		h.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			status = http.StatusBadRequest
		}
		if delay != nil {
			select {
			case <-time.After(delay(n)):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

func (h *hook) body(i int) map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m map[string]any
	json.Unmarshal(h.bodies[i], &m)
	return m
}

// fastWebhook is notify.webhook with backoffs short enough for a test.
func fastWebhook(url string, retries int, timeout time.Duration) *Webhook {
	w := NewWebhook(config.Webhook{URL: url, Timeout: config.Duration(timeout), Retries: &retries})
	w.Base = 5 * time.Millisecond
	return w
}

// raiseOne makes the evaluator raise one alert telling the webhook: a
// spot rule whose condition holds.
func raiseOne(t *testing.T, e *Evaluator) {
	t.Helper()
	e.evalSnapshot(context.Background(), snapshotOf(e.now(), map[domain.Pool]float64{p5("us-west-2a"): 10}))
	if e.fired.Load() != 1 {
		t.Fatalf("fired %d alerts, want 1", e.fired.Load())
	}
}

func deliveries(t *testing.T, e *Evaluator) []DeliveryStatus {
	t.Helper()
	recs, err := e.History(context.Background(), 10)
	if err != nil || len(recs) == 0 {
		t.Fatalf("history: %v %v", recs, err)
	}
	return recs[0].Deliveries
}

func webhookEvaluator(t *testing.T, n Notifier, log *testutil.Buffer) *Evaluator {
	notify := config.Notify{Webhook: &config.Webhook{URL: "http://x"}}
	return newEvaluator(t, Options{Now: newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)).Now, Logger: logger(log),
		Notify: notify, Notifiers: []Notifier{n}, Rules: validRules(t, notify, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
}

func TestWebhookRetriedOn5xxThenDelivered(t *testing.T) {
	h := newHook(t, 500, 502, 200)
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(h.srv.URL+"/T000/B000/secret", 3, time.Second), &log)
	raiseOne(t, e)
	if _, err := e.Once(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if h.calls() != 3 {
		t.Fatalf("webhook got %d POSTs, want 3 (two 5xx, then 200)", h.calls())
	}
	d := deliveries(t, e)
	if len(d) != 1 || d[0].State != DeliveryDone || d[0].Attempts != 3 {
		t.Errorf("delivery %+v, want delivered after 3 attempts", d)
	}
	// Slack reads `text`; the rest of the alert travels with it.
	b := h.body(2)
	if text, _ := b["text"].(string); !strings.Contains(text, "p5.48xlarge") || !strings.Contains(text, "below $20") {
		t.Errorf("text %q", b["text"])
	}
	if b["rule"] != "cheap" || b["kind"] != "spot" || b["usd_hour"] != 10.0 || b["simulated"] != true || b["zone"] != "us-west-2a" {
		t.Errorf("body %v", b)
	}
	if strings.Contains(log.String(), "gave up") {
		t.Errorf("logged a give-up for a delivery that succeeded:\n%s", log.String())
	}
}

func TestWebhookGivesUpAfterTheLimitWithOneLine(t *testing.T) {
	h := newHook(t, 503)
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(h.srv.URL+"/T000/B000/secret", 2, time.Second), &log)
	raiseOne(t, e)
	if _, err := e.Once(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if h.calls() != 3 {
		t.Errorf("webhook got %d POSTs, want 3 (the first and 2 retries)", h.calls())
	}
	d := deliveries(t, e)
	if len(d) != 1 || d[0].State != DeliveryFailed || !strings.Contains(d[0].Error, "503") {
		t.Errorf("delivery %+v, want failed with the 503", d)
	}
	if n := strings.Count(log.String(), "gave up"); n != 1 {
		t.Errorf("%d give-up lines, want 1:\n%s", n, log.String())
	}
	if strings.Contains(log.String(), "secret") {
		t.Errorf("the log shows the hook's secret path:\n%s", log.String())
	}
	// Given up means given up: a later round sends nothing more.
	e.Once(ctxT(t), nil)
	if h.calls() != 3 {
		t.Errorf("a given-up delivery was sent again (%d POSTs)", h.calls())
	}
}

// A hook that answers 200 slower than the timeout got the alert four
// times. A request that went out whole is not sent again: the delivery
// is unconfirmed, said in one line.
func TestWebhookSlowAnswerIsNotSentAgain(t *testing.T) {
	h := newHook(t, 200)
	h.delay = func(int) time.Duration { return 400 * time.Millisecond }
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(h.srv.URL, 3, 100*time.Millisecond), &log)
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	e.Once(ctxT(t), nil)
	d := deliveries(t, e)
	if h.calls() != 1 || len(d) != 1 || d[0].State != DeliveryUnconfirmed || d[0].Attempts != 1 || !strings.Contains(d[0].Error, "sent, no answer within 100ms; not sent again") {
		t.Errorf("%d POSTs, delivery %+v: want one POST, unconfirmed", h.calls(), d)
	}
	if n := strings.Count(log.String(), "not confirmed"); n != 1 {
		t.Errorf("%d lines say so, want 1:\n%s", n, log.String())
	}
}

// A POST that could not have reached the hook (no connection) is tried
// again; the hook gets it once.
func TestWebhookNotSentIsTriedAgain(t *testing.T) {
	h := newHook(t, 200)
	w := fastWebhook(h.srv.URL, 3, time.Second)
	var dials atomic.Int32
	var d net.Dialer
	w.Client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			return nil, errors.New("connection refused")
		}
		return d.DialContext(ctx, network, addr)
	}}}
	var log testutil.Buffer
	e := webhookEvaluator(t, w, &log)
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	if ds := deliveries(t, e); h.calls() != 1 || ds[0].State != DeliveryDone || ds[0].Attempts != 2 {
		t.Errorf("%d POSTs, delivery %+v: want delivered at the second attempt", h.calls(), ds)
	}
}

// Each alert has its own idempotency key, in the body and the header.
func TestWebhookIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var headers []string
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		headers, bodies = append(headers, r.Header.Get("Idempotency-Key")), append(bodies, b)
		mu.Unlock()
	}))
	defer srv.Close()
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(srv.URL, 0, time.Second), &log)
	for _, usd := range []float64{10, 30, 10} { // two crossings
		e.evalSnapshot(context.Background(), snapshotOf(e.now(), map[domain.Pool]float64{p5("us-west-2a"): usd}))
	}
	e.Once(ctxT(t), nil)
	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 2 || len(headers[0]) != 32 || headers[0] == headers[1] || bodies[0]["idempotency_key"] != headers[0] || bodies[1]["idempotency_key"] != headers[1] {
		t.Errorf("keys %q, bodies' %v %v: want one of their own per alert, the same in body and header", headers, bodies[0]["idempotency_key"], bodies[1]["idempotency_key"])
	}
}

// A redirect to another host is not followed; one on the hook's host is.
func TestWebhookRedirects(t *testing.T) {
	other := newHook(t, 200)
	away := httptest.NewServer(http.RedirectHandler(other.srv.URL+"/collect", http.StatusTemporaryRedirect))
	defer away.Close()
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(away.URL+"/T0/B0/secret", 3, time.Second), &log)
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	d := deliveries(t, e)
	if other.calls() != 0 || d[0].State != DeliveryFailed || !strings.Contains(d[0].Error, "another host: not followed") {
		t.Errorf("the other host got %d POSTs; delivery %+v", other.calls(), d)
	}
	mux := http.NewServeMux()
	var got atomic.Int32
	mux.Handle("/old", http.RedirectHandler("/new", http.StatusPermanentRedirect))
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) { got.Add(1) })
	home := httptest.NewServer(mux)
	defer home.Close()
	e = webhookEvaluator(t, fastWebhook(home.URL+"/old", 3, time.Second), &log)
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	if d := deliveries(t, e); got.Load() != 1 || d[0].State != DeliveryDone {
		t.Errorf("a redirect on the same host: %d POSTs at its target, delivery %+v", got.Load(), d)
	}
}

func TestWebhook4xxIsNotRetried(t *testing.T) {
	h := newHook(t, 404)
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(h.srv.URL, 3, time.Second), &log)
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	if d := deliveries(t, e); h.calls() != 1 || d[0].State != DeliveryFailed {
		t.Errorf("%d POSTs, delivery %+v: want one POST, given up", h.calls(), d)
	}
	if n := strings.Count(log.String(), "gave up"); n != 1 {
		t.Errorf("%d give-up lines, want 1", n)
	}
}

func TestWebhookHonoursRetryAfter(t *testing.T) {
	w := &Webhook{Pace: Pace{Base: time.Millisecond}}
	err := &sendError{err: errors.New("429"), after: 7 * time.Second}
	if d := w.Backoff(1, err); d != 7*time.Second {
		t.Errorf("backoff %s, want Retry-After's 7s", d)
	}
	if d := w.Backoff(1, &sendError{err: err, after: time.Hour}); d != maxBackoff {
		t.Errorf("backoff %s, want the cap", d)
	}
	if a, b, c := w.Backoff(1, errors.New("x")), w.Backoff(2, errors.New("x")), w.Backoff(3, errors.New("x")); a != time.Millisecond || b != 2*time.Millisecond || c != 4*time.Millisecond {
		t.Errorf("backoffs %s %s %s, want doubling", a, b, c)
	}
}

func testAlert() Alert {
	return Alert{ID: 42, Rule: "cheap-p5", Kind: "spot", At: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Text: "spot p5.48xlarge in us-west-2a is $10.00/h, below $20.00/h (sim)", Simulated: true, USDHour: f64(10), Tell: []string{TellCommand}}
}

// The command gets the alert as JSON on its stdin, in its environment,
// and its text as the last argument.
func TestCommandGetsTheAlert(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "alert.json")
	script := `cat > "$OUT"; printf '%s' "$GPUMARKET_ALERT_RULE" > "$OUT.rule"; printf '%s' "$0" > "$OUT.arg"`
	t.Setenv("OUT", out)
	c := NewCommand(config.Notify{Command: []string{"sh", "-c", script}})
	a := testAlert()
	if err := c.Send(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	var got Alert
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("stdin %q: %v", data, err)
	}
	if got.ID != 42 || got.Rule != "cheap-p5" || got.Text != a.Text || *got.USDHour != 10 || !got.At.Equal(a.At) {
		t.Errorf("stdin alert %+v", got)
	}
	if rule, _ := os.ReadFile(out + ".rule"); string(rule) != "cheap-p5" {
		t.Errorf("GPUMARKET_ALERT_RULE = %q", rule)
	}
	if arg, _ := os.ReadFile(out + ".arg"); string(arg) != a.Text {
		t.Errorf("last argument %q, want the text", arg)
	}
	// A command that fails says how.
	fail := NewCommand(config.Notify{Command: []string{"sh", "-c", "echo no display >&2; exit 3"}})
	if err := fail.Send(context.Background(), a); err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "no display") {
		t.Errorf("failing command: %v", err)
	}
}

// A command that hangs is killed at its timeout, with the children it
// started.
func TestCommandKilledAtItsTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Setenv("PIDFILE", pidFile)
	c := NewCommand(config.Notify{Command: []string{"sh", "-c", `sleep 60 & echo $! > "$PIDFILE"; wait`}, CommandTimeout: config.Duration(300 * time.Millisecond)})
	start := time.Now()
	err := c.Send(context.Background(), testAlert())
	if err == nil || !strings.Contains(err.Error(), "killed after 300ms") {
		t.Fatalf("Send = %v, want killed at the timeout", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Send took %s", took)
	}
	data, _ := os.ReadFile(pidFile)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if perr != nil {
		t.Fatalf("pid file %q", data)
	}
	waitFor(t, "the hung child to be gone", func() bool { return gone(pid) })
}

// Children a command leaves behind — in its own session (setsid), or
// still running after it exits 0 — survived it. They are killed once it
// has exited, and at its timeout.
func TestCommandLeavesNothingBehind(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc here: only the command's process group is killed")
	}
	// The timeout leaves a loaded machine time to start both children.
	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		fails        bool
	}{
		{"exits 0", `setsid sleep 300 & echo $! > "$PIDS.1"; sleep 300 & echo $! > "$PIDS.2"; exit 0`, 10 * time.Second, false},
		{"times out", `setsid sleep 300 & echo $! > "$PIDS.1"; sleep 300 & echo $! > "$PIDS.2"; sleep 300`, 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pids := filepath.Join(t.TempDir(), "pid")
			t.Setenv("PIDS", pids)
			c := NewCommand(config.Notify{Command: []string{"sh", "-c", tc.script}, CommandTimeout: config.Duration(tc.timeout)})
			start := time.Now()
			err := c.Send(context.Background(), testAlert())
			if (err != nil) != tc.fails {
				t.Fatalf("Send = %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("Send took %s: a child held it", took)
			}
			for _, f := range []string{pids + ".1", pids + ".2"} {
				data, _ := os.ReadFile(f)
				pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
				if perr != nil {
					t.Fatalf("pid file %s: %q", f, data)
				}
				waitFor(t, "child "+strconv.Itoa(pid)+" to be gone", func() bool { return gone(pid) })
			}
		})
	}
}

// gone reports whether a process has ended: no such process, or a
// zombie that its new parent has not reaped yet.
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// The command notifier through the evaluator: one run per alert.
func TestCommandThroughTheEvaluator(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DIR", dir)
	notify := config.Notify{Command: []string{"sh", "-c", `cat > "$DIR/$GPUMARKET_ALERT_ID.json"`}}
	e := newEvaluator(t, Options{Now: newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)).Now, Notify: notify,
		Notifiers: []Notifier{NewCommand(notify)}, Rules: validRules(t, notify, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	raiseOne(t, e)
	e.Once(ctxT(t), nil)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "1.json" {
		t.Fatalf("command ran for %v, want once for alert 1", entries)
	}
	if d := deliveries(t, e); len(d) != 1 || d[0].Channel != TellCommand || d[0].State != DeliveryDone {
		t.Errorf("delivery %+v", d)
	}
}
