package cmd

import (
	"runtime/debug"
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
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var notes []string
	if at != "" {
		notes = append(notes, at)
	}
	if modified {
		notes = append(notes, "modified")
	}
	v += " revision " + rev
	if len(notes) > 0 {
		v += " (" + strings.Join(notes, ", ") + ")"
	}
	return v
}
