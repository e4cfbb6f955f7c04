package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/config"
)

// Notifier tells an alert outward: a command, a webhook.
type Notifier interface {
	// Channel is what a rule's `tell:` names it: TellCommand or
	// TellWebhook.
	Channel() string
	// Send tells one alert, within Timeout. An error wrapped by
	// Permanent is not tried again.
	Send(ctx context.Context, a Alert) error
	// Timeout bounds one Send.
	Timeout() time.Duration
	// Retries is how many times a failed Send is tried again.
	Retries() int
	// Backoff is the wait before attempt n+1 after attempt n failed
	// with err.
	Backoff(n int, err error) time.Duration
	// String names it for logs, without secrets.
	String() string
}

// permanentError is a failure that trying again cannot mend (a webhook's
// 4xx: a bad URL, a revoked hook).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth trying again.
func Permanent(err error) error { return &permanentError{err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// unconfirmedError is a delivery that may have reached its receiver:
// the request went out whole and no answer came. It is not sent again.
type unconfirmedError struct{ err error }

func (e *unconfirmedError) Error() string { return e.err.Error() }
func (e *unconfirmedError) Unwrap() error { return e.err }

// IsUnconfirmed reports whether err is a send that may have arrived.
func IsUnconfirmed(err error) bool {
	var u *unconfirmedError
	return errors.As(err, &u)
}

// retryAfterError carries a server's Retry-After.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// maxBackoff caps the wait between two attempts.
const maxBackoff = time.Minute

// expBackoff doubles base with each attempt, up to maxBackoff; a
// server's Retry-After (429) is honoured up to the same cap.
func expBackoff(base time.Duration, n int, err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) && ra.after > 0 {
		return min(ra.after, maxBackoff)
	}
	d := base
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Webhook POSTs each alert as JSON (Slack-compatible: `text` is the
// line), with its idempotency key in the body and the Idempotency-Key
// header. A 5xx, a 429 or a failure before the request went out is tried
// again with backoff; a request that went out whole and got no answer in
// time is not (the hook may have it); another 4xx is not; a redirect to
// another host is not followed.
type Webhook struct {
	URL string
	// Wait bounds one POST; Tries is the retries after the first.
	Wait  time.Duration
	Tries int
	// Base is the first backoff (default 1s), doubled each time.
	Base   time.Duration
	Client *http.Client
}

// NewWebhook returns the webhook of config notify.webhook.
func NewWebhook(w config.Webhook) *Webhook {
	return &Webhook{URL: w.URL, Wait: w.TimeoutOrDefault(), Tries: w.RetriesOrDefault(), Base: time.Second, Client: &http.Client{}}
}

// Channel is TellWebhook.
func (w *Webhook) Channel() string { return TellWebhook }

// Timeout bounds one POST.
func (w *Webhook) Timeout() time.Duration { return w.Wait }

// Retries is how many times a failed POST is tried again.
func (w *Webhook) Retries() int { return w.Tries }

// Backoff is the wait before the next POST.
func (w *Webhook) Backoff(n int, err error) time.Duration {
	base := w.Base
	if base <= 0 {
		base = time.Second
	}
	return expBackoff(base, n, err)
}

func (w *Webhook) String() string { return "webhook " + config.RedactURL(w.URL) }

// otherHostError is a redirect to another host than the hook's.
type otherHostError struct{ host string }

func (e *otherHostError) Error() string { return "redirected to " + e.host }

// sameHost follows a redirect only on the hook's own host: the alert is
// for the hook the user configured, not wherever it points.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		return &otherHostError{req.URL.Host}
	}
	return nil
}

// Send POSTs the alert.
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
			return &unconfirmedError{fmt.Errorf("POST %s: sent, no answer within %s; not sent again, as the hook may have it (idempotency key %s)", hook, w.Wait, a.IdempotencyKey)}
		case wrote.Load():
			return &unconfirmedError{fmt.Errorf("POST %s: sent, then %v; not sent again, as the hook may have it (idempotency key %s)", hook, unwrapURL(err), a.IdempotencyKey)}
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
		after, _ := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
		return &retryAfterError{err: fmt.Errorf("POST %s: %s", hook, resp.Status), after: time.Duration(after) * time.Second}
	case resp.StatusCode >= 500:
		return fmt.Errorf("POST %s: %s %s", hook, resp.Status, oneLine(string(body)))
	}
	return Permanent(fmt.Errorf("POST %s: %s %s (not tried again: the hook refused it)", hook, resp.Status, oneLine(string(body))))
}

// unwrapURL drops the *url.Error around err: it names the URL, whose
// path is the hook's secret.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Command runs a program once per alert: the alert's text as its last
// argument (so `notify-send gpumarket` shows it), the alert as JSON on
// its stdin and GPUMARKET_ALERT_* in its environment. A command still
// running at its timeout is killed, with what it started.
type Command struct {
	Argv []string
	Wait time.Duration
	// Tries is the retries after the first run (default 0: a command may
	// not be safe to run twice).
	Tries int
}

// NewCommand returns the command of config notify.command.
func NewCommand(n config.Notify) *Command {
	return &Command{Argv: n.Command, Wait: n.CommandTimeoutOrDefault()}
}

// Channel is TellCommand.
func (c *Command) Channel() string { return TellCommand }

// Timeout bounds one run.
func (c *Command) Timeout() time.Duration { return c.Wait }

// Retries is how many times a failed run is run again.
func (c *Command) Retries() int { return c.Tries }

// Backoff is the wait before the next run.
func (c *Command) Backoff(n int, err error) time.Duration { return expBackoff(time.Second, n, err) }

func (c *Command) String() string { return "command " + c.Argv[0] }

// Send runs the command for the alert. It runs in a session of its own,
// and all it started is killed at the timeout or once it has exited: a
// child it left running (even one in a session of its own) would hold
// what it holds.
func (c *Command) Send(ctx context.Context, a Alert) error {
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	args := append(append([]string(nil), c.Argv[1:]...), a.Text)
	cmd := exec.CommandContext(ctx, c.Argv[0], args...)
	cmd.Stdin = bytes.NewReader(append(a.JSON(), '\n'))
	cmd.Env = append(os.Environ(), a.Env()...)
	// Its output goes to a file, not a pipe: a child that keeps it open
	// cannot hold the delivery past the command's end.
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
