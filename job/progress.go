package job

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProgressForm is what a job's progress file or command must say.
const ProgressForm = `the hours of work done as a number, optionally followed by "h" (such as 12.5 or 12.5h)`

// maxProgress bounds what is read of a progress file or command.
const maxProgress = 4096

// commandTimeout bounds a progress command.
const commandTimeout = 10 * time.Second

// ParseProgress reads the hours of work a job reports: its last
// non-empty line, a number ≥ 0 with an optional "h".
func ParseProgress(s string) (float64, error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	v := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(line, "hours"), "h"))
	h, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(h) || math.IsInf(h, 0) || h < 0 || h > 1e6 {
		if len(line) > 40 {
			line = line[:40] + "…"
		}
		return 0, fmt.Errorf("progress %q: want %s", line, ProgressForm)
	}
	return h, nil
}

// readReported reads the progress the job reports, if it names a file or
// command, and takes it as the job's progress; a read that fails keeps
// the model's count and says why in `job show`.
func (r *jobRun) readReported(ctx context.Context) error {
	t := r.j.Terms
	if t.ProgressFile == "" && t.ProgressCommand == "" {
		return nil
	}
	var b []byte
	var err error
	if t.ProgressFile != "" {
		b, err = readBounded(t.ProgressFile)
	} else {
		cctx, cancel := context.WithTimeout(ctx, commandTimeout)
		b, err = exec.CommandContext(cctx, "/bin/sh", "-c", t.ProgressCommand).Output()
		cancel()
		b = b[max(0, len(b)-maxProgress):]
	}
	var h float64
	if err == nil {
		h, err = ParseProgress(string(b))
	}
	if err != nil {
		r.p.ReportErr = err.Error()
		return nil
	}
	r.p.ReportErr = ""
	r.p.Reported = &h
	r.p.LiveState = r.lj.Reported(r.p.LiveState, h)
	return nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxProgress {
		if _, err := f.Seek(-maxProgress, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, maxProgress))
}
