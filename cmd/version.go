package cmd

import (
	"runtime/debug"
	"slices"
	"strings"
)

// version says which gpumarket this is: the module version the binary was
// built at (go install …@v1.2.3), else "(devel)", plus the VCS revision
// and whether the tree had changes, when the build recorded them (a build
// in a git checkout does).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return versionOf(bi)
}

// versionOf words a build's version: "v1.2.3", "(devel) revision
// 1a2b3c4d5e6f (2026-11-30T10:00:00Z, modified)".
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		return v
	}
	v += " revision " + rev[:min(len(rev), 12)]
	notes := []string{vcs["vcs.time"]}
	if vcs["vcs.modified"] == "true" {
		notes = append(notes, "modified")
	}
	if notes = slices.DeleteFunc(notes, func(n string) bool { return n == "" }); len(notes) > 0 {
		v += " (" + strings.Join(notes, ", ") + ")"
	}
	return v
}
