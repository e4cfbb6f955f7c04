package cmd

import (
	"bytes"
	"context"
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
		{[]string{"prices", "--provider", "gcp"}, "--provider"},
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

func TestBadConfigFileExit1(t *testing.T) {
	isolate(t)
	code, _, stderr := runCmd(t, "prices", "--config", "/nonexistent/gpumarket.yaml")
	if code != 1 || !strings.Contains(stderr, "/nonexistent/gpumarket.yaml") {
		t.Errorf("exit %d, stderr %q; want 1 naming the file", code, stderr)
	}
}

func TestHelpExit0(t *testing.T) {
	code, stdout, _ := runCmd(t, "prices", "--help")
	if code != 0 || !strings.Contains(stdout, "--window") {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}
