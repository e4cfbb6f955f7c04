//go:build unix

package watch

import (
	"os/exec"
	"syscall"
)

// killGroup makes the command the leader of its own process group and,
// at its timeout, kills the whole group: `sh -c 'curl …'` leaves no curl
// behind holding the delivery open.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
