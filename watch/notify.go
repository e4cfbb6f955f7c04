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

func IsPermanent(err error) bool {
	var s *sendError
	return errors.As(err, &s) && s.permanent
}

func IsUnconfirmed(err error) bool {
	var s *sendError
	return errors.As(err, &s) && s.unconfirmed
}

const maxBackoff = time.Minute

// expBackoff doubles base per attempt; a Retry-After wins; both capped.
func expBackoff(base time.Duration, n int, err error) time.Duration {
	var ra *sendError
	if errors.As(err, &ra) && ra.after > 0 {
		return min(ra.after, maxBackoff)
	}
	d := base
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Webhook POSTs each alert as JSON (Slack reads `text`) with its idempotency key.
type Webhook struct {
	URL    string
	Wait   time.Duration // one POST
	Tries  int           // retries after the first
	Base   time.Duration // the first backoff (default 1s)
	Client *http.Client
}

func NewWebhook(w config.Webhook) *Webhook {
	return &Webhook{URL: w.URL, Wait: w.TimeoutOrDefault(), Tries: w.RetriesOrDefault(), Base: time.Second, Client: &http.Client{}}
}

func (w *Webhook) Channel() string { return TellWebhook }

func (w *Webhook) Timeout() time.Duration { return w.Wait }

func (w *Webhook) Retries() int { return w.Tries }

func (w *Webhook) Backoff(n int, err error) time.Duration {
	base := w.Base
	if base <= 0 {
		base = time.Second
	}
	return expBackoff(base, n, err)
}

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
	Argv  []string
	Wait  time.Duration
	Tries int
}

func NewCommand(n config.Notify) *Command {
	return &Command{Argv: n.Command, Wait: n.CommandTimeoutOrDefault()}
}

func (c *Command) Channel() string { return TellCommand }

func (c *Command) Timeout() time.Duration { return c.Wait }

func (c *Command) Retries() int { return c.Tries }

func (c *Command) Backoff(n int, err error) time.Duration { return expBackoff(time.Second, n, err) }

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
