package cmd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
)

// TestLineHandler: a one-shot command's log record is one stderr line in
// the CLI's words, never slog's "time=… level=WARN msg=…" text.
func TestLineHandler(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newLineHandler(&b, slog.LevelWarn))
	log.Info("not shown at warn")
	log.Warn("capacity block offering skipped", "offering", "cb-1", "reason", "fee\nNaN")
	log.With("provider", "aws").WithGroup("req").Error("describe failed", "region", "us-east-1", "err", errors.New("boom"))
	log.Warn("empty attrs left out", slog.Attr{}, slog.Group("g", "k", 1))
	want := "gpumarket: warning: capacity block offering skipped (offering cb-1, reason fee NaN)\n" +
		"gpumarket: error: describe failed (provider aws, req.region us-east-1, req.err boom)\n" +
		"gpumarket: warning: empty attrs left out (g.k 1)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	t.Setenv("GPUMARKET_DEBUG", "1")
	slog.New(newLineHandler(&b, logLevel(slog.LevelWarn))).Debug("fetched", "pools", 3)
	if b.String() != "gpumarket: debug: fetched (pools 3)\n" {
		t.Errorf("with GPUMARKET_DEBUG: %q", b.String())
	}
}

// TestCommandWarningsAreLines: what a provider logs during `prices` (the
// AWS provider's "capacity block offering skipped", say) reaches stderr
// as one "gpumarket: warning:" line, with no slog text.
func TestCommandWarningsAreLines(t *testing.T) {
	isolate(t)
	table := withRow("sim", func(_ context.Context, e *app.Settings) (domain.Provider, error) {
		e.Log.Warn("a pool skipped", "pool", "p5.48xlarge", "reason", "no price")
		return sim.New(sim.Options{Seed: 1}), nil
	})
	code, out, errOut := runTable(t, table, "prices", "--gpu", "H100", "-o", "json")
	if code != 0 || out == "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "level=") || !strings.Contains(errOut, "gpumarket: warning: a pool skipped (pool p5.48xlarge, reason no price)\n") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// TestCannotReachSaysTheProviderOnce: a provider that cannot be built is
// one line naming it once ("cannot reach aws: no credentials…", not
// "cannot reach aws: aws: no credentials…").
func TestCannotReachSaysTheProviderOnce(t *testing.T) {
	isolate(t)
	table := withRow("aws", func(context.Context, *app.Settings) (domain.Provider, error) {
		return nil, errors.New("aws: no credentials: set AWS_PROFILE")
	})
	_, _, errOut := runTable(t, table, "ledger", "--rebuild", "--provider", "aws", "-o", "json")
	if !strings.Contains(errOut, "gpumarket: ledger: --rebuild: cannot reach aws: no credentials: set AWS_PROFILE\n") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
