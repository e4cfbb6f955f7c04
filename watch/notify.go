package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
// line). A 5xx, a 429 or a timeout is tried again with backoff; another
// 4xx is not.
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

// Send POSTs the alert.
func (w *Webhook) Send(ctx context.Context, a Alert) error {
	ctx, cancel := context.WithTimeout(ctx, w.Wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(a.JSON()))
	if err != nil {
		return Permanent(fmt.Errorf("webhook request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpumarket-watch")
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// The URL's path is a secret: say the host only.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("POST %s: no answer within %s", config.RedactURL(w.URL), w.Wait)
		}
		return fmt.Errorf("POST %s: %w", config.RedactURL(w.URL), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		after, _ := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
		return &retryAfterError{err: fmt.Errorf("POST %s: %s", config.RedactURL(w.URL), resp.Status), after: time.Duration(after) * time.Second}
	case resp.StatusCode >= 500:
		return fmt.Errorf("POST %s: %s %s", config.RedactURL(w.URL), resp.Status, oneLine(string(body)))
	}
	return Permanent(fmt.Errorf("POST %s: %s %s (not tried again: the hook refused it)", config.RedactURL(w.URL), resp.Status, oneLine(string(body))))
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

// Send runs the command for the alert.
func (c *Command) Send(ctx context.Context, a Alert) error {
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	args := append(append([]string(nil), c.Argv[1:]...), a.Text)
	cmd := exec.CommandContext(ctx, c.Argv[0], args...)
	cmd.Stdin = bytes.NewReader(append(a.JSON(), '\n'))
	cmd.Env = append(os.Environ(), a.Env()...)
	var out bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: 2048}
	cmd.Stderr = cmd.Stdout
	killGroup(cmd)
	// A child that keeps the output open after the kill must not hold
	// the delivery: stop waiting for it soon after.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("command %s: killed after %s without finishing", c.Argv[0], c.Wait)
	}
	return fmt.Errorf("command %s: %w: %s", c.Argv[0], err, oneLine(out.String()))
}

// limited keeps the first n bytes written to it.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
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
