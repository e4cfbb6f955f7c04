package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cancelled context (SIGINT or SIGTERM, through Execute's
// signal.NotifyContext) ends plan and backtest with one line saying so.
func TestPlanAndBacktestInterrupted(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "a.json")
	data := strings.TrimSuffix(strings.Repeat("1, 0, ", 2000), ", ")
	if err := os.WriteFile(trace, []byte(`{"metadata": {"gap_seconds": 300}, "data": [`+data+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backtest", "--trace", trace, "--job-hours", "24", "--deadline-hours", "36"}, "gpumarket: backtest: interrupted\n"},
		{[]string{"plan", "--gpus", "8", "--gpu", "H100", "--hours", "24", "--deadline", "+3d", "--runs", "1000000"}, "gpumarket: plan: interrupted\n"},
	} {
		var out, errOut bytes.Buffer
		code := run(ctx, c.args, strings.NewReader(""), &out, &errOut)
		if code != 1 || out.Len() != 0 || errOut.String() != c.want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args[0], code, out.String(), errOut.String(), c.want)
		}
	}
}
