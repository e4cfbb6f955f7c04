//go:build !unix

package watch

import "os/exec"

// isolate leaves the default: no sessions or process groups here.
func isolate(*exec.Cmd, string) {}

func sweep(int, string) {}
