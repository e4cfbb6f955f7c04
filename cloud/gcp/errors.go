package gcp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/gpumarket/gpumarket/domain"
)

// retrying resends on 429 or 5xx with full-jitter backoff or Retry-After, per
// Google's retry strategy; changes carry a requestId, so a resend is not done
// twice. A body it cannot read again (no GetBody; googleapi always sets one) is sent once.
type retrying struct {
	base  http.RoundTripper
	tries int
	first time.Duration
	log   *slog.Logger
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	once := req.Body != nil && req.GetBody == nil
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(req.Context())
			if req.GetBody != nil {
				b, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = b
			}
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil || once || !retryable(resp.StatusCode) || attempt+1 >= t.tries {
			return resp, err
		}
		wait := backoff(t.first, attempt, resp.Header.Get("Retry-After"), time.Now())
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		t.log.Debug("gcp: retrying", "status", resp.StatusCode, "url", req.URL.Path, "wait", wait)
		if err := domain.Sleep(req.Context(), wait); err != nil {
			return nil, err
		}
	}
}

func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusInternalServerError ||
		code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// backoff is Google's Retry-After (seconds or HTTP date, RFC 9110 10.2.3), at
// most a minute, else a random wait up to first·2^attempt, capped at 32 s.
func backoff(first time.Duration, attempt int, retryAfter string, now time.Time) time.Duration {
	if d, ok := domain.RetryAfter(retryAfter, now, time.Minute); ok {
		return d
	}
	d := min(first<<min(attempt, 10), 32*time.Second)
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// Declined reports Google's definite "no": a 4xx but throttling, or an
// operation ended in error. A 5xx or lost connection is unknown.
func Declined(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code >= 400 && ge.Code < 500 && ge.Code != http.StatusTooManyRequests && ge.Code != http.StatusRequestTimeout
	}
	var oe *opError
	return errors.As(err, &oe)
}

// notFound reports a 404 answer.
func notFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}

// apiErr words a Google error in one line: its status, reason and message.
func apiErr(what string, err error) error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return fmt.Errorf("gcp: %s: %w", what, err)
	}
	reason := ""
	if r := errorReason(ge); r != "" {
		reason = r + ": "
	}
	msg := firstLine(ge.Message)
	if msg == "" && len(ge.Errors) > 0 {
		msg = firstLine(ge.Errors[0].Message)
	}
	return &wrapped{msg: fmt.Sprintf("gcp: %s: %d %s%s", what, ge.Code, reason, msg), err: err}
}

// errorReason is Compute's "errors" reason, or the newer APIs' google.rpc.ErrorInfo.
func errorReason(ge *googleapi.Error) string {
	for _, d := range ge.Details {
		if m, ok := d.(map[string]any); ok && m["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			if r, ok := m["reason"].(string); ok && r != "" {
				return r
			}
		}
	}
	if len(ge.Errors) > 0 {
		return ge.Errors[0].Reason
	}
	return ""
}

// wrapped keeps the API error for errors.As under a one-line message.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// opError is an operation that ended in an error: Google did not do it.
type opError struct {
	what string
	op   *compute.Operation
}

func (e *opError) Error() string {
	var parts []string
	if e.op.Error != nil {
		for _, x := range e.op.Error.Errors {
			parts = append(parts, firstLine(x.Code+": "+x.Message))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, firstLine(fmt.Sprintf("%d %s", e.op.HttpErrorStatusCode, e.op.HttpErrorMessage)))
	}
	return fmt.Sprintf("gcp: %s: operation %s failed: %s", e.what, e.op.Name, strings.Join(parts, "; "))
}

func (e *opError) Is(target error) bool { return target == domain.ErrDeclined }

// wait polls an operation where it lives until DONE; one ended in an error is an *opError.
func (p *Provider) wait(ctx context.Context, what string, op *compute.Operation) (*compute.Operation, error) {
	for op.Status != "DONE" {
		if err := domain.Sleep(ctx, p.opt.PollEvery); err != nil {
			return op, fmt.Errorf("gcp: %s: operation %s still %s: %w", what, op.Name, op.Status, err)
		}
		var err error
		switch {
		case op.Zone != "":
			op, err = p.compute.ZoneOperations.Get(p.project, path.Base(op.Zone), op.Name).Context(ctx).Do()
		case op.Region != "":
			op, err = p.compute.RegionOperations.Get(p.project, path.Base(op.Region), op.Name).Context(ctx).Do()
		default:
			op, err = p.compute.GlobalOperations.Get(p.project, op.Name).Context(ctx).Do()
		}
		if err != nil {
			return nil, apiErr(what+": operation", err)
		}
	}
	if op.Error != nil && len(op.Error.Errors) > 0 || op.HttpErrorStatusCode >= 400 {
		return op, &opError{what: what, op: op}
	}
	return op, nil
}

// requestID is a ledger id as the UUID-shaped requestId Compute takes, the same
// for every retry of the call.
func requestID(ref, call string) string {
	h := fnv64(ref + "\x00" + call)
	g := fnv64(call + "\x00" + ref)
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff, uint16(g>>48)&0xfff, g&0xffffffffffff)
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// labelValue makes a label value: lower-case letters, digits, - and _, at most 63.
func labelValue(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 63 {
			break
		}
	}
	return b.String()
}

// resourceName makes an RFC 1035 name from a prefix and a ledger id.
func resourceName(prefix, ref string) string {
	n := prefix + "-" + strings.Trim(strings.ReplaceAll(labelValue(ref), "_", "-"), "-")
	if len(n) > 63 {
		n = n[:63]
	}
	return strings.TrimRight(n, "-")
}
