package watch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

// Notifier tells an alert outward: a command, a webhook.
type Notifier interface {
	Channel() string // what `tell:` names it
	// Send tells one alert within Timeout; a Permanent or unconfirmed error is not retried.
	Send(ctx context.Context, a Alert) error
	Timeout() time.Duration
	Retries() int
	// Backoff is the wait after attempt n failed with err.
	Backoff(n int, err error) time.Duration
	String() string // for logs, without secrets
}

// sendError is a failed send: permanent (a revoked hook: trying again cannot
// mend it), unconfirmed (sent whole without an answer: the receiver may have
// it), or to be tried again after a wait the receiver named.
type sendError struct {
	err         error
	permanent   bool
	unconfirmed bool
	after       time.Duration
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// Permanent marks err as not worth trying again.
func Permanent(err error) error { return &sendError{err: err, permanent: true} }

const maxBackoff = time.Minute

// Pace is a notifier's timeouts and retries, shared by the webhook and the command.
type Pace struct {
	Wait  time.Duration // one send
	Tries int           // retries after the first
	Base  time.Duration // the first backoff (default 1s)
}

func (p Pace) Timeout() time.Duration { return p.Wait }

func (p Pace) Retries() int { return p.Tries }

// Backoff doubles Base per attempt; a Retry-After wins; both capped.
func (p Pace) Backoff(n int, err error) time.Duration {
	var ra *sendError
	if errors.As(err, &ra) && ra.after > 0 {
		return min(ra.after, maxBackoff)
	}
	d := cmp.Or(p.Base, time.Second)
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Webhook POSTs each alert as JSON (Slack reads `text`) with its idempotency key.
type Webhook struct {
	URL string
	Pace
	Client *http.Client
}

func NewWebhook(w config.Webhook) *Webhook {
	return &Webhook{URL: w.URL, Pace: Pace{Wait: w.TimeoutOrDefault(), Tries: w.RetriesOrDefault()}, Client: &http.Client{}}
}

func (w *Webhook) Channel() string { return TellWebhook }

func (w *Webhook) String() string { return "webhook " + config.RedactURL(w.URL) }

type otherHostError struct{ host string }

func (e *otherHostError) Error() string { return "redirected to " + e.host }

// sameHost follows redirects on the hook's host only.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		return &otherHostError{req.URL.Host}
	}
	return nil
}

// Send POSTs the alert; one sent whole without an answer is unconfirmed.
func (w *Webhook) Send(ctx context.Context, a Alert) error {
	ctx, cancel := context.WithTimeout(ctx, w.Wait)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(a.JSON()))
	if err != nil {
		return Permanent(fmt.Errorf("webhook request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpumarket-watch")
	if a.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", a.IdempotencyKey)
	}
	client := http.Client{}
	if w.Client != nil {
		client = *w.Client
	}
	client.CheckRedirect = sameHost
	hook := config.RedactURL(w.URL)
	resp, err := client.Do(req)
	if err != nil {
		var oh *otherHostError
		switch {
		case errors.As(err, &oh):
			return Permanent(fmt.Errorf("POST %s: %v, another host: not followed", hook, oh))
		case wrote.Load() && ctx.Err() != nil:
			return &sendError{unconfirmed: true, err: fmt.Errorf("POST %s: sent, no answer within %s; not sent again, as the hook may have it (idempotency key %s)", hook, w.Wait, a.IdempotencyKey)}
		case wrote.Load():
			return &sendError{unconfirmed: true, err: fmt.Errorf("POST %s: sent, then %v; not sent again, as the hook may have it (idempotency key %s)", hook, unwrapURL(err), a.IdempotencyKey)}
		case ctx.Err() != nil:
			return fmt.Errorf("POST %s: not sent within %s", hook, w.Wait)
		}
		return fmt.Errorf("POST %s: %w", hook, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		after, _ := domain.RetryAfter(resp.Header.Get("Retry-After"), time.Now(), maxBackoff)
		return &sendError{err: fmt.Errorf("POST %s: %s", hook, resp.Status), after: after}
	case resp.StatusCode >= 500:
		return fmt.Errorf("POST %s: %s %s", hook, resp.Status, oneLine(string(body)))
	}
	return Permanent(fmt.Errorf("POST %s: %s %s (not tried again: the hook refused it)", hook, resp.Status, oneLine(string(body))))
}

// unwrapURL drops the *url.Error: its URL's path is the hook's secret.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Command runs a program per alert: its text as last argument, the JSON on
// stdin and in GPUMARKET_ALERT_*; no retries by default (it may not be safe twice).
type Command struct {
	Argv []string
	Pace
}

func NewCommand(n config.Notify) *Command {
	return &Command{Argv: n.Command, Pace: Pace{Wait: n.CommandTimeoutOrDefault()}}
}

func (c *Command) Channel() string { return TellCommand }

func (c *Command) String() string { return "command " + c.Argv[0] }

// Send runs the command in its own session, killing all it started at the timeout or exit.
func (c *Command) Send(ctx context.Context, a Alert) error {
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	args := append(append([]string(nil), c.Argv[1:]...), a.Text)
	cmd := exec.CommandContext(ctx, c.Argv[0], args...)
	cmd.Stdin = bytes.NewReader(append(a.JSON(), '\n'))
	cmd.Env = append(os.Environ(), a.Env()...)
	// A file, not a pipe: a child holding it cannot hold the delivery.
	out, err := os.CreateTemp("", "gpumarket-notify-*")
	if err != nil {
		return fmt.Errorf("command %s: %w", c.Argv[0], err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	run := newKey()
	isolate(cmd, run)
	err = cmd.Run()
	if cmd.Process != nil {
		sweep(cmd.Process.Pid, run)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("command %s: killed after %s without finishing", c.Argv[0], c.Wait)
	}
	said := make([]byte, 2048)
	n, _ := out.ReadAt(said, 0)
	return fmt.Errorf("command %s: %w: %s", c.Argv[0], err, oneLine(string(said[:n])))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

const claimBatch = 16

// deliverLoop sends what is owed until ctx ends, then waits for sends in flight; the rest stays owed.
func (e *Evaluator) deliverLoop(ctx context.Context) {
	defer e.inflight.Wait()
	if len(e.notifiers) == 0 {
		return
	}
	for {
		e.deliverDue(ctx)
		wait := e.opt.Tick
		if _, next, err := e.opt.State.owed(ctx, e.channels); err == nil && !next.IsZero() {
			wait = min(wait, max(time.Until(next), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (e *Evaluator) deliverDue(ctx context.Context) {
	if len(e.notifiers) == 0 || ctx.Err() != nil {
		return
	}
	ds, err := e.opt.State.claim(ctx, e.channels, e.owner, time.Now(), e.lease, claimBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("watch: claim deliveries", "err", err)
		}
		return
	}
	e.dispatch(ctx, ds)
}

// dispatch sends claimed deliveries; those it cannot start go back.
func (e *Evaluator) dispatch(ctx context.Context, ds []delivery) {
	for _, d := range ds {
		n := e.notifiers[d.channel]
		if ctx.Err() != nil || n == nil {
			e.opt.State.release(ctx, d, e.owner)
			continue
		}
		e.inflight.Add(1)
		go func() {
			defer e.inflight.Done()
			// Begun, a send runs to its answer or timeout whatever ctx does.
			e.send(context.WithoutCancel(ctx), n, d)
		}()
	}
}

// send makes one attempt and records how it went.
func (e *Evaluator) send(ctx context.Context, n Notifier, d delivery) {
	err := n.Send(ctx, d.alert)
	var ferr error
	var se *sendError
	errors.As(err, &se)
	switch {
	case err == nil:
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryDone, "", time.Time{})
	case se != nil && se.unconfirmed:
		e.log.Warn("watch: an alert was sent but not confirmed; it is not sent again", "channel", n.String(), "alert", d.alert.ID, "rule", d.alert.Rule, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryUnconfirmed, err.Error(), time.Time{})
	case se != nil && se.permanent || d.attempts > n.Retries():
		e.log.Warn("watch: gave up telling an alert", "channel", n.String(), "alert", d.alert.ID, "rule", d.alert.Rule, "attempts", d.attempts, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryFailed, err.Error(), time.Time{})
	default:
		next := time.Now().Add(n.Backoff(d.attempts, err))
		e.log.Debug("watch: delivery failed, to be tried again", "channel", n.String(), "alert", d.alert.ID, "attempt", d.attempts, "next", next, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryPending, err.Error(), next)
	}
	if ferr != nil {
		e.log.Error("watch: record delivery", "err", ferr)
	}
	poke(e.wake)
}

// Alert is one firing of a rule; its JSON (stdin, webhook body) is flat
// snake_case, null where a field is not the kind's.
type Alert struct {
	ID        int64     `json:"id"` // the State's row id: alerts' order
	Rule      string    `json:"rule"`
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
	Text      string    `json:"text"`
	Simulated bool      `json:"simulated"`

	Provider     *string  `json:"provider"`
	Region       *string  `json:"region"`
	Zone         *string  `json:"zone"`
	InstanceType *string  `json:"instance_type"`
	GPUModel     *string  `json:"gpu_model"`
	GPUCount     *float64 `json:"gpu_count"`
	USDHour      *float64 `json:"usd_hour"`
	USDGPUHour   *float64 `json:"usd_gpu_hour"` // a block's, or a plan's per useful GPU-hour
	// TotalUSD: a block's upfront price, a plan's expected cost, or an idle row's cost so far.
	TotalUSD       *float64   `json:"total_usd"`
	ThresholdUSD   *float64   `json:"threshold_usd"`
	OfferingID     *string    `json:"offering_id"` // for `gpumarket book ID`
	Start          *time.Time `json:"start"`
	End            *time.Time `json:"end"`
	Bucket         *string    `json:"bucket"`
	PreviousBucket *string    `json:"previous_bucket"`
	Strategy       *string    `json:"strategy"`
	LedgerIDs      []string   `json:"ledger_ids"`
	IdlePct        *float64   `json:"idle_pct"`
	IdleUSD        *float64   `json:"idle_usd"`
	ThresholdPct   *float64   `json:"threshold_pct"`
	Tell           []string   `json:"tell"`
	// IdempotencyKey lets a receiver that got it twice tell.
	IdempotencyKey string `json:"idempotency_key"`
}

// Tells reports whether the alert goes to where.
func (a Alert) Tells(where string) bool { return slices.Contains(a.Tell, where) }

// JSON is the alert as notifiers send it.
func (a Alert) JSON() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic("watch: marshal alert: " + err.Error())
	}
	return b
}

// Line is the alert as `gpumarket watch` logs it.
func (a Alert) Line() string {
	return a.At.UTC().Format(time.RFC3339) + " alert " + a.Rule + ": " + a.Text
}

// Env is the alert as a command's environment.
func (a Alert) Env() []string {
	return []string{
		"GPUMARKET_ALERT_ID=" + strconv.FormatInt(a.ID, 10),
		"GPUMARKET_ALERT_RULE=" + a.Rule,
		"GPUMARKET_ALERT_KIND=" + a.Kind,
		"GPUMARKET_ALERT_AT=" + a.At.UTC().Format(time.RFC3339),
		"GPUMARKET_ALERT_TEXT=" + a.Text,
		"GPUMARKET_ALERT_SIMULATED=" + strconv.FormatBool(a.Simulated),
		"GPUMARKET_ALERT_JSON=" + string(a.JSON()),
	}
}

// DeliveryStatus is where one outward delivery of an alert stands.
type DeliveryStatus struct {
	Channel  string
	State    string
	Attempts int
	Error    string
}

// Delivery states. Unconfirmed: sent whole, no answer; not sent again.
const (
	DeliveryPending     = "pending"
	DeliverySending     = "sending"
	DeliveryDone        = "delivered"
	DeliveryFailed      = "failed"
	DeliveryUnconfirmed = "unconfirmed"
)

// Record is an alert with its deliveries, for the Alerts view.
type Record struct {
	Alert
	Deliveries []DeliveryStatus
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func fp(v float64) *float64 { return &v }

func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func simNote(simulated bool) string {
	if simulated {
		return " (SIMULATED MARKET)"
	}
	return ""
}

// source ends a pool alert's text: its provider, or that it is simulated.
func source(provider string, simulated bool) string {
	if simulated {
		return simNote(true)
	}
	return " (" + provider + ")"
}
