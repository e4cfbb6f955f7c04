package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/tui"
)

// acmeCloud is a cloud gpumarket has never heard of: its own
// domain.Cloud, instance types no catalog lists.
const acmeCloud domain.Cloud = "acme-cloud"

// acmeProvider sells and prices acmeCloud's one GPU machine.
type acmeProvider struct{ *ledgertest.Fake }

func (p acmeProvider) Fetch(_ context.Context, req domain.FetchRequest, sink domain.Sink) error {
	key := domain.PoolKey{Provider: p.Name(), Region: "acme-north1", Zone: "acme-north1-a", InstanceType: "acme.h100x8"}
	sink(domain.Event{Provider: p.Name(), Region: key.Region,
		Pools: []domain.Pool{{Provider: p.Name(), Cloud: acmeCloud, Region: key.Region, Zone: key.Zone, InstanceType: key.InstanceType,
			GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}, OnDemandUSDHour: domain.Float(40)}},
		Points: []domain.PricePoint{{Pool: key, At: req.Until, USDHour: 12}}})
	return nil
}

// TestAddingAProviderOfANewCloudIsOneRow: a provider of a cloud of its
// own, given as one row of the provider table, is named by the config
// file, priced, searched and shown in the TUI's header with no other
// change: nothing lists the clouds.
func TestAddingAProviderOfANewCloudIsOneRow(t *testing.T) {
	isolate(t)
	o := ledgertest.Offering("acme", "acme-1", time.Now().Add(48*time.Hour), 48, 1, 3000)
	o.Cloud, o.Region, o.Zone, o.InstanceType = acmeCloud, "acme-north1", "acme-north1-a", "acme.h100x8"
	fake := acmeProvider{ledgertest.New("acme", o)}
	fake.Desc = domain.Descriptor{Name: "acme", Cloud: acmeCloud, CloudTitle: "Acme Cloud", IsRegion: func(r string) bool { return strings.HasPrefix(r, "acme-") },
		RegionExample: "acme-north1", Sells: []*domain.BookingTerms{domain.ReservationTerms}}
	c := &cli{table: append(app.DefaultTable(), app.Row{Desc: fake.Desc,
		Build: func(context.Context, *app.Settings) (domain.Provider, error) { return fake, nil }})}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("providers: [acme]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUMARKET_CONFIG", cfg)
	runC := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := c.run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	// No --provider: the config file's list names it.
	code, out, errOut := runC("prices", "-o", "json")
	if code != 0 {
		t.Fatalf("prices: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 1 || rows[0]["provider"] != "acme" || rows[0]["cloud"] != string(acmeCloud) || rows[0]["instance_type"] != "acme.h100x8" ||
		rows[0]["spot_usd_hour"] != 12.0 || rows[0]["gpu_model"] != "H100" {
		t.Errorf("prices: %v", rows)
	}
	if strings.Contains(out+errOut, "SIMULATED") {
		t.Errorf("a provider that is not simulated was called simulated: %s%s", out, errOut)
	}
	code, out, errOut = runC("offerings", "--gpu", "H100", "--count", "1", "--duration", "48h", "--region", "acme-north1", "-o", "json")
	if code != 0 {
		t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
	if rows, _ := jsonRows(t, out); len(rows) != 1 || rows[0]["id"] != "acme-1" || rows[0]["cloud"] != string(acmeCloud) {
		t.Errorf("offerings: %v", rows)
	}

	// Messages name the cloud as its row titles it.
	code, _, errOut = runC("fleet", "launch", "--provider", "acme", "--region", "acme-north1", "--instance-types", "p5.48xlarge",
		"--target", "1", "--yes", "--dry-run")
	if code != 2 || !strings.Contains(errOut, "p5.48xlarge is an AWS instance type, but --provider acme launches Acme Cloud ones (gpumarket's catalog lists no Acme Cloud instance type)") {
		t.Errorf("fleet launch of another cloud's type: exit %d: %s", code, errOut)
	}

	// Beside the simulated market, whose banner names the real providers.
	code, _, errOut = runC("prices", "--provider", "sim,acme", "-o", "json")
	if code != 0 || !strings.Contains(errOut, "use --provider aws, azure, gcp or acme for real ones") {
		t.Errorf("prices with the sim: exit %d: %s", code, errOut)
	}
	// A name the table does not have is refused where the file says it.
	if err := os.WriteFile(cfg, []byte("providers: [acme, oci]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runC("prices", "-o", "json"); code == 0 || !strings.Contains(errOut, ":1:19: providers[1]: unknown provider \"oci\"; want one of sim, aws, azure, gcp, acme") {
		t.Errorf("an unknown provider in the config: exit %d: %s", code, errOut)
	}

	// The TUI's header names the source, and no simulated badge.
	e, _, _ := testEnv(t, domain.Query{Providers: []string{"acme"}})
	a := c.appOf(context.Background(), e)
	defer a.Close()
	h := a.HubOver([]domain.Provider{fake})
	if _, err := a.Ready(context.Background(), h, time.Minute, false, nil); err != nil {
		t.Fatal(err)
	}
	opt := a.tuiOptions(h, nil)
	opt.NoColor = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt.Context = ctx
	m := tui.New(opt)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	feedMsgs(m, m.Init())
	view := m.View().Content
	header := strings.Join(strings.Split(view, "\n")[:3], "\n")
	if !strings.Contains(header, "acme") || strings.Contains(header, "SIM") {
		t.Errorf("TUI header:\n%s", header)
	}
}

// feedMsgs runs a command's messages into the model, a batch's each, for
// at most a second.
func feedMsgs(m tea.Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	got := make(chan tea.Msg, 1)
	go func() { got <- cmd() }()
	select {
	case msg := <-got:
		if b, ok := msg.(tea.BatchMsg); ok {
			for _, c := range b {
				feedMsgs(m, c)
			}
			return
		}
		m.Update(msg)
	case <-time.After(time.Second):
	}
}
