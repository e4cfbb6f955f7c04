//go:build unix

package watch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// runVar marks every process of a command's run, even those leaving its session.
const runVar = "GPUMARKET_NOTIFY_RUN"

// isolate runs the command in its own session, killed whole at its timeout.
func isolate(cmd *exec.Cmd, run string) {
	cmd.Env = append(cmd.Env, runVar+"="+run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		if cmd.Process != nil {
			sweep(cmd.Process.Pid, run)
		}
		return nil
	}
}

// sweep kills what is left of a run: its group and every process naming the run in /proc.
func sweep(pid int, run string) {
	syscall.Kill(-pid, syscall.SIGKILL)
	mark := []byte(runVar + "=" + run + "\x00")
	self := os.Getpid()
	for range 3 { // a process forking meanwhile is found at the next pass
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		found := false
		for _, d := range dirs {
			p, err := strconv.Atoi(filepath.Base(d))
			if err != nil || p == self {
				continue
			}
			env, err := os.ReadFile(d + "/environ")
			if err == nil && bytes.Contains(env, mark) {
				syscall.Kill(p, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
	}
}
