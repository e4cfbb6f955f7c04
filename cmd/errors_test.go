package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCmd runs one command line in-process with a clean environment.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	isolate(t)
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// isolate keeps a test away from the user's config and data.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	// serve refuses a host key below a directory others may write, which
	// t.TempDir's can be under a umask of 002.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", dir+"/config")
	t.Setenv("XDG_DATA_HOME", dir+"/data")
	t.Setenv("GPUMARKET_CONFIG", "")
	t.Setenv("GPUMARKET_DATA_DIR", "")
	t.Setenv("HOME", dir)
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := []struct {
		args []string
		want string // the flag the message must name
	}{
		{[]string{"prices", "--window", "3x"}, "--window"},
		{[]string{"prices", "--window", "91d"}, "--window"},
		{[]string{"history", "--window", "0h"}, "--window"},
		{[]string{"prices", "--gpu", "H900"}, "--gpu"},
		{[]string{"prices", "--gpu", ","}, "--gpu"},
		{[]string{"prices", "--provider", "oci"}, "--provider"},
		{[]string{"prices", "--region", "US East!"}, "--region"},
		{[]string{"prices", "--seed", "x"}, "--seed"},
		{[]string{"prices", "--timeout", "soon"}, "--timeout"},
		{[]string{"prices", "--timeout", "0s"}, "--timeout"},
		{[]string{"prices", "-o", "yaml"}, "-o"},
		{[]string{"history", "-o", "xml"}, "-o"},
		{[]string{"history", "--instance-type", "p5 48x"}, "--instance-type"},
		{[]string{"prices", "--bogus"}, "--bogus"},
		{[]string{"prices", "--window"}, "--window"},
		{[]string{"prices", "-o"}, "-o needs a value"},
		{[]string{"prices", "--gpu"}, "H100"},
		{[]string{"pricez"}, "pricez"},
		{[]string{"prices", "extra"}, "extra"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "gpumarket: ") {
				t.Errorf("stderr %q, want one line", stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q does not name %s", stderr, c.want)
			}
		})
	}
}

func TestWindowMessageSaysAcceptedForm(t *testing.T) {
	_, _, stderr := runCmd(t, "prices", "--window", "3x")
	for _, w := range []string{"--window", "7d", "90d"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q lacks %q", stderr, w)
		}
	}
}

// A config file that cannot be read is a runtime failure (exit 1): the
// command line was right.
func TestUnreadableConfigFileExit1(t *testing.T) {
	isolate(t)
	for _, p := range []string{"/nonexistent/gpumarket.yaml", t.TempDir()} {
		code, _, stderr := runCmd(t, "prices", "--config", p)
		if code != 1 || !strings.Contains(stderr, p) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("--config %s: exit %d, stderr %q; want 1 and one line naming the file", p, code, stderr)
		}
	}
}

// A config file with a bad value or an unknown key exited 1,
// though the README says 2 for a bad value. Every refusal of a file's
// content is bad usage (exit 2): one line naming file:line:col and what
// is accepted, and no output.
func TestBadConfigContentExit2(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // besides the file's name
	}{
		{"unknown key", "providers: [sim]\nwindo: 24h\n", []string{":2:1:", `unknown key "windo"`, "want one of", "window"}},
		{"bad value", "window: 3x\n", []string{":1:9:", "window", "7d"}},
		{"value out of range", "serve:\n  max_sessions: 0\n", []string{":2:3:", "serve.max_sessions", "≥ 1"}},
		{"wrong type", "sim: {seed: x}\n", []string{":1:13:", "sim.seed", "whole number"}},
		{"bad role", "serve:\n  roles: {\"SHA256:abc\": admin}\n", []string{":2:", `"admin"`, "viewer, booker"}},
		{"syntax", "providers: [sim\n", []string{":1:", "want YAML"}},
		{"second document", "window: 7d\n---\nwindow: 6h\n", []string{":3:1:", "second YAML document"}},
		{"too big", "#" + strings.Repeat("x", 1<<20) + "\n", []string{"1048578 bytes", "1 MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			p := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runCmd(t, "prices", "--config", p)
			if code != exitUsage {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "gpumarket: load config: "+p) {
				t.Errorf("stdout %q stderr %q, want no output and one line naming %s", stdout, stderr, p)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
	// The same through $GPUMARKET_CONFIG and the default file.
	isolate(t)
	p := filepath.Join(t.TempDir(), "env.yaml")
	os.WriteFile(p, []byte("window: 3x\n"), 0o600)
	t.Setenv("GPUMARKET_CONFIG", p)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"prices"}, strings.NewReader(""), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), p+":1:9:") {
		t.Errorf("GPUMARKET_CONFIG with a bad value: exit %d stderr %q, want 2 naming %s:1:9", code, errOut.String(), p)
	}
}

// Through the command: an empty config file is the defaults.
func TestEmptyConfigFileRuns(t *testing.T) {
	for _, body := range []string{"", "# nothing set yet\n", "---\n"} {
		isolate(t)
		p := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(p, []byte(body), 0o600)
		code, stdout, stderr := runCmd(t, "prices", "--config", p, "-o", "json")
		if code != 0 || !strings.HasPrefix(strings.TrimSpace(stdout), "[") {
			t.Errorf("config %q: exit %d stderr %q stdout %.80q, want exit 0 and JSON rows", body, code, stderr, stdout)
		}
	}
}

func TestHelpExit0(t *testing.T) {
	code, stdout, _ := runCmd(t, "prices", "--help")
	if code != 0 || !strings.Contains(stdout, "--window") {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}
