package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvConfig, EnvDataDir, EnvAWSAdvisorURL, EnvAzurePricesURL, EnvAzureSubID, EnvAWSProfile} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

func TestLoadFull(t *testing.T) {
	clearEnv(t)
	p := writeFile(t, `
providers: [aws, azure]
regions: [us-east-1, eastus]
gpus: [h100, A100]
window: 7d
refresh: 45s
risk: {checkpoint_interval: 30m, restart_overhead: 3m}
budget: {max_booking_usd: 100, max_daily_usd: 0, max_idle_pct: 40}
sim: {seed: 7, tick: 500ms}
aws: {profile: ml, launch_template: lt-1}
azure: {subscription_id: sub-1, resource_group: rg}
serve:
  listen: ":2200"
  idle_timeout: 10m
  max_sessions: 5
  roles: {"SHA256:abc": booker, "SHA256:def": viewer}
`)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || len(c.Providers) != 2 || c.GPUs[0] != "H100" || c.Window.D() != 7*24*time.Hour ||
		c.Refresh.D() != 45*time.Second || c.Risk.CheckpointInterval.D() != 30*time.Minute || c.Sim.Seed != 7 ||
		c.Sim.Tick.D() != 500*time.Millisecond || c.Budget.MaxBookingUSD != 100 || c.Budget.MaxIdlePct != 40 || c.Serve.MaxSessions != 5 ||
		c.Serve.Roles["SHA256:abc"] != "booker" || c.AWS.Profile != "ml" {
		t.Errorf("got %+v", c)
	}
	// keys the file does not name keep their defaults
	if c.AWS.AdvisorURL != Default().AWS.AdvisorURL {
		t.Errorf("advisor_url = %q, want the default", c.AWS.AdvisorURL)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // substrings of the error
	}{
		{"unknown top key", "providers: [sim]\nwindo: 24h\n", []string{":2:1:", `unknown key "windo"`, "window"}},
		{"unknown nested key", "risk:\n  checkpoint_interval: 15m\n  restart_overhed: 6m\n", []string{":3:3:", `"restart_overhed"`, "restart_overhead"}},
		{"bad duration", "refresh: 3x\n", []string{":1:10:", "refresh", "30s"}},
		{"number for duration", "sim:\n  tick: 5\n", []string{":2:9:", "sim.tick", "duration"}},
		{"bad window", "window: 3x\n", []string{":1:9:", "window", "7d"}},
		{"window too long", "window: 91d\n", []string{":1:9:", "90 days"}},
		{"bad role", "serve:\n  roles:\n    \"SHA256:abc\": admin\n", []string{":3:5:", "serve.roles", `"admin"`, "viewer, booker"}},
		{"bad provider", "providers: [sim, gcp]\n", []string{":1:18:", "providers[1]", "sim, aws, azure"}},
		{"provider not a list", "providers: aws\n", []string{":1:12:", "providers", "list"}},
		{"bad gpu", "gpus: [H100, X1]\n", []string{"gpus[1]", "H100"}},
		{"bad seed", "sim: {seed: x}\n", []string{":1:13:", "sim.seed", "whole number"}},
		{"refresh too short", "refresh: 10ms\n", []string{":1:1:", "refresh", "1s"}},
		{"tick too short", "sim: {tick: 1ms}\n", []string{"sim.tick", "100ms"}},
		{"negative budget", "budget:\n  max_booking_usd: -1\n", []string{":2:3:", "budget.max_booking_usd", "≥ 0"}},
		{"idle share over 100", "budget:\n  max_idle_pct: 150\n", []string{":2:3:", "budget.max_idle_pct", "0 to 100"}},
		{"negative idle share", "budget: {max_idle_pct: -5}\n", []string{"budget.max_idle_pct", "0 to 100"}},
		{"max sessions", "serve: {max_sessions: 0}\n", []string{"serve.max_sessions", "≥ 1"}},
		{"bad listen", "serve: {listen: nowhere}\n", []string{"serve.listen", "host:port"}},
		{"bad url", "aws: {advisor_url: 'ftp://x'}\n", []string{"aws.advisor_url", "https://"}},
		{"scalar for section", "risk: 5\n", []string{":1:7:", "risk", "mapping"}},
		{"syntax", "providers: [sim\n", []string{"config.yaml:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			p := writeFile(t, c.body)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("Load succeeded")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p) {
				t.Errorf("error %q does not start with the file name", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestLoadSearchOrder(t *testing.T) {
	clearEnv(t)
	// no file anywhere: the defaults
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != "" || c.Window.D() != 24*time.Hour {
		t.Errorf("got %+v, want defaults", c)
	}
	// the XDG file
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	os.MkdirAll(filepath.Join(xdg, "gpumarket"), 0o700)
	os.WriteFile(filepath.Join(xdg, "gpumarket", "config.yaml"), []byte("window: 6h\n"), 0o600)
	if c, err = Load(""); err != nil || c.Window.D() != 6*time.Hour {
		t.Errorf("XDG file: %v %v", c.Window.D(), err)
	}
	// GPUMARKET_CONFIG beats XDG
	t.Setenv(EnvConfig, writeFile(t, "window: 2w\n"))
	if c, err = Load(""); err != nil || c.Window.D() != 14*24*time.Hour {
		t.Errorf("GPUMARKET_CONFIG: %v %v", c.Window.D(), err)
	}
	// the named file beats both
	if c, err = Load(writeFile(t, "window: 30m\n")); err != nil || c.Window.D() != 30*time.Minute {
		t.Errorf("named file: %v %v", c.Window.D(), err)
	}
	// a named file or GPUMARKET_CONFIG that does not exist is an error
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); err == nil {
		t.Error("missing named file: no error")
	}
	t.Setenv(EnvConfig, filepath.Join(t.TempDir(), "nope.yaml"))
	if _, err := Load(""); err == nil {
		t.Error("missing GPUMARKET_CONFIG file: no error")
	}
}

func TestEnvOverrides(t *testing.T) {
	clearEnv(t)
	p := writeFile(t, "aws: {profile: file, advisor_url: 'https://file/a'}\nazure: {subscription_id: file-sub, prices_url: 'https://file/p'}\n")
	t.Setenv(EnvAWSAdvisorURL, "http://127.0.0.1:1/advisor")
	t.Setenv(EnvAzurePricesURL, "http://127.0.0.1:1/prices")
	t.Setenv(EnvAWSProfile, "env-profile")
	t.Setenv(EnvAzureSubID, "env-sub")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.AWS.AdvisorURL != "http://127.0.0.1:1/advisor" || c.Azure.PricesURL != "http://127.0.0.1:1/prices" || c.AWS.Profile != "env-profile" {
		t.Errorf("env did not override the file: %+v %+v", c.AWS, c.Azure)
	}
	if c.Azure.SubscriptionID != "file-sub" {
		t.Errorf("subscription = %q, want the file's (AZURE_SUBSCRIPTION_ID fills it only when unset)", c.Azure.SubscriptionID)
	}
	c, err = Load(writeFile(t, "window: 24h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Azure.SubscriptionID != "env-sub" {
		t.Errorf("subscription = %q, want env-sub", c.Azure.SubscriptionID)
	}
}

func TestDataDir(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "b")
	t.Setenv(EnvDataDir, d)
	got, err := DataDir()
	if err != nil || got != d {
		t.Fatalf("DataDir = %q, %v", got, err)
	}
	if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("stat %v %v, want a 0700 dir", fi, err)
	}
	t.Setenv(EnvDataDir, "")
	x := t.TempDir()
	t.Setenv("XDG_DATA_HOME", x)
	if got, err := DataDir(); err != nil || got != filepath.Join(x, "gpumarket") {
		t.Errorf("XDG: %q %v", got, err)
	}
}

func TestValidateDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Errorf("Default() does not validate: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "providers: [sim]\n", "window: 7d\nrefresh: 30s\n", "risk: {checkpoint_interval: 15m}\n",
		"serve:\n  roles:\n    \"SHA256:a\": booker\n", "a: &x {b: 1}\nrisk: *x\n", "- 1\n- 2\n", "---\n---\n",
		"sim: {seed: 99999999999999999999}\n", "<<: {window: 1h}\n", "window: !!str 7d\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err == nil {
			// what Parse accepts is valid
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted %q but Validate says %v", data, verr)
			}
		} else if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
			t.Fatalf("error %q does not name the file", err)
		}
	})
}
