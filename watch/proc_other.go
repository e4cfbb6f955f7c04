//go:build !unix

package watch

import "os/exec"

// killGroup leaves the default: the command alone is killed at its
// timeout (there are no process groups to kill here).
func killGroup(*exec.Cmd) {}
