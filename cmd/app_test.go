package cmd

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/planner"
)

// snapshotOf runs the app's hub over the given sources until they are
// ready, as `prices` does over the query's, and stops it.
func (e *env) snapshotOf(ctx context.Context, ps []domain.Provider, timeout time.Duration) (*feed.Snapshot, error) {
	a := newCLI().appOf(ctx, e)
	defer a.Close()
	return a.Ready(ctx, a.HubOver(ps), timeout, false, nil)
}

// TestAddingAProviderIsOneRow: a provider gpumarket has never heard of,
// given as one row of the provider table, is asked for prices through
// the hub, searched for offerings, booked through the ledger and listed,
// by the same commands as the built-in ones, with no other change.
func TestAddingAProviderIsOneRow(t *testing.T) {
	isolate(t)
	fake := ledgertest.New("acme", ledgertest.Offering("acme", "acme-1", time.Now().Add(48*time.Hour), 48, 1, 3000))
	fake.SpotUSDHour = 10
	fake.Desc.IsRegion = func(r string) bool { return r == "us-east-1" }
	fake.Desc.RegionExample = "us-east-1"
	c := &cli{table: append(app.DefaultTable(), app.Row{Desc: fake.Desc,
		Build: func(context.Context, *app.Settings) (domain.Provider, error) { return fake, nil }})}
	runC := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := c.run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := runC("prices", "--provider", "acme", "-o", "json")
	if code != 0 {
		t.Fatalf("prices: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 2 || rows[0]["provider"] != "acme" || rows[0]["spot_usd_hour"] != 10.0 {
		t.Errorf("prices: %v", rows)
	}
	if strings.Contains(out+errOut, "SIMULATED") {
		t.Errorf("a provider that is not simulated was called simulated: %s%s", out, errOut)
	}
	if code, _, errOut := runC("prices", "--provider", "acme", "--region", "eastus"); code != 2 || !strings.Contains(errOut, "no acme region (such as us-east-1)") {
		t.Errorf("a region the provider does not know: exit %d %q", code, errOut)
	}

	code, out, errOut = runC("offerings", "--provider", "acme", "--gpu", "H100", "--count", "1", "--duration", "48h", "-o", "json")
	if code != 0 {
		t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
	if rows, _ := jsonRows(t, out); len(rows) != 1 || rows[0]["id"] != "acme-1" {
		t.Fatalf("offerings: %v", rows)
	}
	code, _, errOut = runC("book", "acme-1", "--yes", "-o", "json")
	if code != 0 || !fake.Bought("acme-1") {
		t.Fatalf("book: exit %d, bought %v: %s", code, fake.Bought("acme-1"), errOut)
	}
	code, out, errOut = runC("ledger", "--provider", "acme", "-o", "json")
	if code != 0 {
		t.Fatalf("ledger: exit %d: %s", code, errOut)
	}
	if rows, _ := jsonRows(t, out); len(rows) != 1 || rows[0]["provider"] != "acme" || rows[0]["kind"] != "block" || rows[0]["state"] != "scheduled" {
		t.Errorf("ledger: %v", rows)
	}
}

// TestNoProviderNameComparisons: above the providers, code asks a
// provider's descriptor what it is, never compares its name. Provider
// names are spelled only in their own package, the config's list of
// names, and tests.
func TestNoProviderNameComparisons(t *testing.T) {
	root := ".."
	re := regexp.MustCompile(`(==|!=)\s*"(sim|aws|azure)"|case\s+"(sim|aws|azure)"`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, own := range []string{"cloud/"} {
			if strings.HasPrefix(filepath.ToSlash(rel), own) {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "//"); re.MatchString(code) {
				t.Errorf("%s:%d compares a provider's name: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTUIOptionsCarryThePlanConfig: every TUI session (local or over SSH)
// gets config plan.*: the job EFF prices pools for and the Plan view's
// form starts from, and plan.speed over the planner's defaults.
func TestTUIOptionsCarryThePlanConfig(t *testing.T) {
	e, _, _ := testEnv(t, domain.Query{})
	e.Config.Plan.GPUs, e.Config.Plan.Hours = 16, 48
	e.Config.Plan.Speed = map[string]float64{"A100": 0.5}
	a := newCLI().appOf(context.Background(), e)
	defer a.Close()
	opt := a.tuiOptions(nil, nil)
	if opt.Effective.GPUs != 16 || opt.Effective.Hours != 48 {
		t.Errorf("basis %+v", opt.Effective)
	}
	if opt.Speeds["A100"] != 0.5 || opt.Speeds["H100"] != 1 || opt.Speeds["H200"] != planner.DefaultSpeeds["H200"] {
		t.Errorf("speeds %v", opt.Speeds)
	}
}
