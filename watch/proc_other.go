//go:build !unix

package watch

import "os/exec"

// isolate leaves the default: the command alone is killed at its
// timeout (there are no sessions or process groups here).
func isolate(*exec.Cmd, string) {}

func sweep(int, string) {}
