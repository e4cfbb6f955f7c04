package cmd

import (
	"runtime/debug"
	"strings"
	"testing"
)

// `gpumarket --version` says which build this is.
func TestVersionFlagSaysTheBuild(t *testing.T) {
	code, out, errOut := runCmd(t, "--version")
	if code != 0 || out != "gpumarket "+version()+"\n" || errOut != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, "gpumarket "+version())
	}
	if v := version(); v == "" || strings.Contains(v, "{{") {
		t.Errorf("version %q", v)
	}
}

func TestVersionOfNamesTheRevision(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"},
			{Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) revision 1a2b3c4d5e6f (2026-11-30T10:00:00Z, modified)"},
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, "v1.2.3 revision abc"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}
