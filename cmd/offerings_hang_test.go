//go:build booking15

// This test needs the booking branch's FindOfferings (each provider
// bounded by the service's timeout, the ledger read with a context of its
// own): without it the search fails with "ledger keys: context deadline
// exceeded". Drop the build tag when booking is merged; it passes on a
// merge of cli and booking.

package cmd

import (
	"context"
	"testing"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
)

// hangingFinder sells blocks but never answers a search: it waits until
// its caller gives up.
type hangingFinder struct{ finderFake }

func (hangingFinder) FindOfferings(ctx context.Context, _ domain.OfferingQuery) ([]domain.Offering, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A provider that hangs leaves the others' offerings: printed within
// --timeout, one warning naming it, exit 0 (it once exited 1
// blaming "ledger keys: context deadline exceeded").
func TestOfferingsPrintsOthersWhenAProviderHangs(t *testing.T) {
	isolate(t)
	hang := hangingFinder{finderFake{name: "acme"}}
	table := append(app.DefaultTable(), app.Row{Desc: hang.Describe(),
		Build: func(context.Context, *app.Settings) (domain.Provider, error) { return hang, nil }})
	code, out, errOut := runTable(t, table, "offerings", "--provider", "sim,acme", "--gpu", "H100", "--count", "1", "--duration", "2d", "--timeout", "2s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, want 0 (the sim answered): %s", code, errOut)
	}
	if rows, _ := jsonRows(t, out); len(rows) == 0 || rows[0]["provider"] != "sim" {
		t.Errorf("rows %v, want the simulated market's", rows)
	}
	if w := warningLines(errOut, "offerings: acme"); len(w) != 1 {
		t.Errorf("warnings %q, want one naming the provider that hung\nstderr: %s", w, errOut)
	}
}
