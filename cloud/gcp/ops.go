package gcp

import (
	"context"
	"fmt"
	"path"
	"strings"

	"google.golang.org/api/compute/v1"
)

// wait polls an operation where it lives until DONE; one ended in an error is an *opError.
func (p *Provider) wait(ctx context.Context, what string, op *compute.Operation) (*compute.Operation, error) {
	for op.Status != "DONE" {
		if err := sleepCtx(ctx, p.opt.PollEvery); err != nil {
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
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
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
