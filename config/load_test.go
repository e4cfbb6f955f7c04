package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
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
	for _, k := range []string{EnvConfig, EnvDataDir, EnvAWSAdvisorURL, EnvAzurePricesURL, EnvAzureSubID, EnvAWSProfile, EnvSimSpeed} {
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
		{"bad provider", "providers: [sim, OCI]\n", []string{":1:18:", "providers[1]", "provider's name"}},
		{"provider not a list", "providers: aws\n", []string{":1:12:", "providers", "list"}},
		{"bad gpu", "gpus: [H100, X1]\n", []string{"gpus[1]", "H100"}},
		{"bad seed", "sim: {seed: x}\n", []string{":1:13:", "sim.seed", "whole number"}},
		{"refresh too short", "refresh: 10ms\n", []string{":1:1:", "refresh", "1s"}},
		{"tick too short", "sim: {tick: 1ms}\n", []string{"sim.tick", "100ms"}},
		{"speed zero", "sim: {speed: 0}\n", []string{"sim.speed", "from 1", "7200"}},
		{"speed too fast", "sim: {speed: 100000}\n", []string{"sim.speed", "86400"}},
		{"negative budget", "budget:\n  max_booking_usd: -1\n", []string{":2:3:", "budget.max_booking_usd", "≥ 0"}},
		{"negative daily cap", "budget: {max_daily_usd: -0.5}\n", []string{":1:10:", "budget.max_daily_usd", "≥ 0 (0 means no cap)"}},
		{"daily cap not a number", "budget: {max_daily_usd: .nan}\n", []string{"budget.max_daily_usd", "≥ 0"}},
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

// sim.speed is a whole number from 1; GPUMARKET_SIM_SPEED overrides the
// file, and a bad value is named as the variable.
func TestSimSpeed(t *testing.T) {
	clearEnv(t)
	if c, err := Load(""); err != nil || c.Sim.Speed != 1 {
		t.Errorf("default speed %d %v, want 1", c.Sim.Speed, err)
	}
	p := writeFile(t, "sim: {speed: 60}\n")
	if c, err := Load(p); err != nil || c.Sim.Speed != 60 {
		t.Errorf("file speed %d %v, want 60", c.Sim.Speed, err)
	}
	t.Setenv(EnvSimSpeed, "7200")
	if c, err := Load(p); err != nil || c.Sim.Speed != 7200 {
		t.Errorf("env speed %d %v, want 7200", c.Sim.Speed, err)
	}
	for _, bad := range []string{"fast", "0", "-3", "1.5"} {
		t.Setenv(EnvSimSpeed, bad)
		c, err := Load(p)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), EnvSimSpeed) || !strings.Contains(err.Error(), "from 1") {
			t.Errorf("GPUMARKET_SIM_SPEED=%s: %v", bad, err)
		}
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

// A file that sets nothing (empty, comments only, "---") is the defaults.
func TestConfigWithoutSettingsIsDefaults(t *testing.T) {
	for name, body := range map[string]string{
		"empty":                  "",
		"blank lines":            "\n\n  \n",
		"comments only":          "# gpumarket config\n\n# window: 7d\n",
		"document start":         "---\n",
		"two empty documents":    "---\n---\n",
		"start, comment, end":    "---\n# nothing yet\n...\n",
		"null":                   "~\n",
		"byte-order mark only":   "\uFEFF",
		"mark and comment":       "\uFEFF# c\n",
		"section left empty":     "serve:\n  # listen: 0.0.0.0:2222\n",
		"two sections left bare": "risk:\nbudget:\n",
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			p := writeFile(t, body)
			c, err := Load(p)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := Default()
			want.Path = p
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got %+v\nwant the defaults %+v", c, want)
			}
		})
	}
}

// A byte-order mark before real settings is not a value.
func TestConfigWithByteOrderMark(t *testing.T) {
	c, err := Parse("bom.yaml", []byte("\uFEFFwindow: 7d\n"))
	if err != nil || c.Window.D() != 7*24*time.Hour {
		t.Errorf("window %v err %v, want 7d", c.Window.D(), err)
	}
}

// Settings after a second "---" are refused, placed at the document.
func TestSecondDocumentRefused(t *testing.T) {
	for _, body := range []string{"window: 7d\n---\nwindow: 3x\n", "window: 7d\n---\nrefresh: 1m\n"} {
		_, err := Parse("two.yaml", []byte(body))
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line != 3 || !strings.Contains(err.Error(), "two.yaml:3:1: a second YAML document; want one document") {
			t.Errorf("%q: err %v, want a FileError at two.yaml:3:1 naming the second document", body, err)
		}
	}
	// A first document that sets nothing leaves the second as the one.
	c, err := Parse("one.yaml", []byte("# header\n---\nwindow: 6h\n"))
	if err != nil || c.Window.D() != 6*time.Hour {
		t.Errorf("comment then one document: window %v err %v, want 6h", c.Window.D(), err)
	}
}

// A file over MaxFileSize is refused before parsing, with its name, size and the limit.
func TestConfigSizeLimit(t *testing.T) {
	clearEnv(t)
	line := "# " + strings.Repeat("x", 61) + "\n" // 64 bytes
	atLimit := strings.Repeat(line, MaxFileSize/len(line))
	if len(atLimit) != MaxFileSize {
		t.Fatalf("test file of %d bytes, want %d", len(atLimit), MaxFileSize)
	}
	if _, err := Load(writeFile(t, atLimit)); err != nil {
		t.Errorf("a file of exactly %d bytes: %v", MaxFileSize, err)
	}
	p := writeFile(t, atLimit+"#")
	_, err := Load(p)
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v, want a FileError", err)
	}
	for _, w := range []string{p, "1048577 bytes", "larger than the 1 MiB"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err %q lacks %q", err, w)
		}
	}
	if _, err := Parse("big.yaml", []byte(atLimit+"#")); !errors.As(err, &fe) || !strings.Contains(err.Error(), "big.yaml") {
		t.Errorf("Parse of an oversized file: %v", err)
	}
}

// The size limit holds for a file whose size cannot be known before
// reading (a pipe): it is read up to one byte past the limit, no more.
func TestConfigSizeLimitOnAPipe(t *testing.T) {
	clearEnv(t)
	p := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	go func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		chunk := []byte(strings.Repeat("#", 4096) + "\n")
		for range 2 * MaxFileSize / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the reader stopped at the limit
			}
		}
	}()
	_, err := Load(p)
	var fe *FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Errorf("err %v, want a FileError saying more than 1048576 bytes", err)
	}
}

// Errors of the file's content are *FileError (bad usage to cmd); a file
// that cannot be read is not.
func TestFileErrorOnlyForContent(t *testing.T) {
	clearEnv(t)
	var fe *FileError
	for _, body := range []string{"windo: 24h\n", "window: 3x\n", "providers: [sim\n", "serve: {max_sessions: 0}\n"} {
		if _, err := Load(writeFile(t, body)); !errors.As(err, &fe) || fe.Line == 0 {
			t.Errorf("%q: err %v, want a FileError with a line", body, err)
		}
	}
	for _, p := range []string{filepath.Join(t.TempDir(), "missing.yaml"), t.TempDir()} {
		if _, err := Load(p); err == nil || errors.As(err, &fe) {
			t.Errorf("%s: err %v, want a read error that is not a FileError", p, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "providers: [sim]\n", "window: 7d\nrefresh: 30s\n", "risk: {checkpoint_interval: 15m}\n",
		"serve:\n  roles:\n    \"SHA256:a\": booker\n", "a: &x {b: 1}\nrisk: *x\n", "- 1\n- 2\n", "---\n---\n",
		"sim: {seed: 99999999999999999999}\n", "<<: {window: 1h}\n", "window: !!str 7d\n",
		"# only a comment\n", "---\n", "~\n", "\uFEFFwindow: 7d\n", "window: 7d\n---\nwindow: 3x\n",
		"serve:\n", "# c\n---\nwindow: 6h\n...\n", "window: 7d\nwindow: 6h\n",
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
			return
		}
		// every refusal is one line naming the file (and its place,
		// when it has one), for cmd to print as bad usage
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Fatalf("error %q is not a FileError", err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "fuzz.yaml") || strings.Contains(msg, "\n") {
			t.Fatalf("error %q does not name the file on one line", msg)
		}
		if fe.Line > 0 && !strings.HasPrefix(msg, fmt.Sprintf("fuzz.yaml:%d:%d: ", fe.Line, fe.Col)) {
			t.Fatalf("error %q does not start with its place", msg)
		}
	})
}

// TestREADMEConfigLoads: the README's Configuration and Watch examples load.
func TestREADMEConfigLoads(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, section := range []string{"## Configuration", "## Watch: rules and alerts"} {
		i := strings.Index(readme, section)
		if i < 0 {
			t.Fatalf("no %q in the README", section)
		}
		i = strings.Index(readme[i:], "```yaml\n") + i + len("```yaml\n")
		j := strings.Index(readme[i:], "```") + i
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(readme[i:j]), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			t.Errorf("the README's %s example: %v", section, err)
		}
	}
}
