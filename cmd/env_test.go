package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

func TestParseFlags(t *testing.T) {
	if got, err := parseList(flagGPU, " h100, A100 ,h100", nil); err != nil || !slices.Equal(got, []string{"H100", "A100"}) {
		t.Errorf("--gpu: %v %v", got, err)
	}
	if got, err := parseList(flagProvider, "SIM,aws", app.DefaultTable().Names()); err != nil || !slices.Equal(got, []string{"sim", "aws"}) {
		t.Errorf("--provider: %v %v", got, err)
	}
	if got, err := parseList(flagRegion, "us-east-1,EastUS", nil); err != nil || !slices.Equal(got, []string{"us-east-1", "eastus"}) {
		t.Errorf("--region: %v %v", got, err)
	}
}

// FuzzFilterFlags checks that the filter flags never panic, name their
// flag when they refuse, and return only what they accept.
func FuzzFilterFlags(f *testing.F) {
	for _, s := range []string{"", ",", "H100", "h100,a100", "sim,aws,azure", "us-east-1, eastus", "  ,x,", "A10G,A10", "ü,\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var ue *usageError
		if got, err := parseList(flagGPU, v, nil); err != nil {
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "--gpu") {
				t.Fatalf("--gpu %q: %v", v, err)
			}
		} else {
			for _, g := range got {
				if !slices.Contains(domain.GPUModels, g) {
					t.Fatalf("--gpu %q gave %q", v, g)
				}
			}
		}
		if got, err := parseList(flagProvider, v, app.DefaultTable().Names()); err != nil {
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "--provider") {
				t.Fatalf("--provider %q: %v", v, err)
			}
		} else {
			for _, p := range got {
				if !slices.Contains(app.DefaultTable().Names(), p) {
					t.Fatalf("--provider %q gave %q", v, p)
				}
			}
		}
		if got, err := parseList(flagRegion, v, nil); err != nil {
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "--region") {
				t.Fatalf("--region %q: %v", v, err)
			}
		} else {
			for _, r := range got {
				if !config.ValidRegion(r) {
					t.Fatalf("--region %q gave %q", v, r)
				}
			}
		}
	})
}

// TestSetupOrder checks Default → file → env → flags.
func TestSetupOrder(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte("providers: [sim]\ngpus: [A100]\nwindow: 7d\nsim: {seed: 5, tick: 1s}\naws: {profile: file}\n"), 0o600)
	t.Setenv("AWS_PROFILE", "env")

	root := newCLI().rootCmd()
	pc, _, err := root.Find([]string{"prices"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.ParseFlags([]string{"--config", p, "--gpu", "h100", "--seed", "9"}); err != nil {
		t.Fatal(err)
	}
	e, err := newCLI().setup(pc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Query.GPUs, []string{"H100"}) || e.Config.Sim.Seed != 9 {
		t.Errorf("flags did not win: gpus %v seed %d", e.Query.GPUs, e.Config.Sim.Seed)
	}
	if e.Query.Window.Hours() != 7*24 || e.Config.AWS.Profile != "env" || e.Config.Sim.Tick.D().Seconds() != 1 {
		t.Errorf("file/env: window %v profile %q tick %v", e.Query.Window, e.Config.AWS.Profile, e.Config.Sim.Tick.D())
	}
	if !slices.Equal(e.Query.Providers, []string{"sim"}) {
		t.Errorf("providers %v", e.Query.Providers)
	}
}

func TestSetupDefaultsToSim(t *testing.T) {
	isolate(t)
	root := newCLI().rootCmd()
	pc, _, _ := root.Find([]string{"prices"})
	pc.ParseFlags(nil)
	e, err := newCLI().setup(pc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Query.Providers, []string{"sim"}) || !app.DefaultTable().Simulated(e.Query.Providers) {
		t.Errorf("providers %v, want sim", e.Query.Providers)
	}
	if fi, err := os.Stat(e.DataDir); err != nil || !fi.IsDir() {
		t.Errorf("data dir %q: %v", e.DataDir, err)
	}
}

func TestBadFlagBeatsBadConfig(t *testing.T) {
	isolate(t)
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("bogus: 1\n"), 0o600)
	code, _, stderr := runCmd(t, "prices", "--config", p, "--window", "3x")
	if code != 2 || !strings.Contains(stderr, "--window") {
		t.Errorf("exit %d %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "prices", "--config", p)
	if code != 2 || !strings.Contains(stderr, p+":1:1:") {
		t.Errorf("exit %d %q, want 2 with file:line:col", code, stderr)
	}
}

func TestRegionFilterMustReachEachCloud(t *testing.T) {
	for _, tc := range []struct {
		provs, regions []string
		ok             bool
	}{
		{[]string{"aws"}, []string{"eastus"}, false},
		{[]string{"azure"}, []string{"us-east-1"}, false},
		{[]string{"aws", "azure"}, []string{"us-east-1", "eastus"}, true},
		{[]string{"aws"}, nil, true},
		{[]string{"sim"}, []string{"eastus"}, true},
		{[]string{"sim", "aws"}, []string{"eastus"}, false},
		// The simulated market has its own regions, under real names.
		{[]string{"sim"}, []string{"mars-1"}, false},
		{[]string{"sim"}, []string{"us-west-1"}, false},
		// A name no provider in use has is refused even beside one it
		// has: it would be dropped with no word.
		{[]string{"sim"}, []string{"mars-1", "ap-south-1"}, false},
		{[]string{"sim", "azure"}, []string{"us-east-1", "mars-1"}, false},
		{[]string{"sim", "azure"}, []string{"us-east-1", "westus2"}, true},
	} {
		err := app.DefaultTable().CheckRegions(tc.provs, tc.regions)
		if (err == nil) != tc.ok {
			t.Errorf("%v %v: %v", tc.provs, tc.regions, err)
		}
		var ue *usageError
		if err != nil && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "--region")) {
			t.Errorf("%v %v: %v is not a usage error naming --region", tc.provs, tc.regions, err)
		}
	}
}
