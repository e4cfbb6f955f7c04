package job_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
)

func TestParseProgress(t *testing.T) {
	for in, want := range map[string]float64{"12.5": 12.5, "12.5h\n": 12.5, "step 9\n3 hours": 3, " 0 ": 0, "7h": 7} {
		if got, err := job.ParseProgress(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-1", "NaN", "Inf", "1e400", "12.5 GPUs"} {
		if _, err := job.ParseProgress(in); err == nil || !strings.Contains(err.Error(), "want the hours of work done") {
			t.Errorf("%q accepted or unclear: %v", in, err)
		}
	}
}

func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{"12.5", "3h", "x\n4 hours", "-0", "0x1p3", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := job.ParseProgress(s)
		if err == nil && (math.IsNaN(h) || math.IsInf(h, 0) || h < 0 || h > 1e6) {
			t.Errorf("%q read as %v", s, h)
		}
	})
}

// A job that reports its progress is counted by what it says: once it
// says the work is done, it is done, whatever the model counted.
func TestReportedProgress(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, d := w.process(t)
	file := filepath.Join(t.TempDir(), "progress")
	if err := os.WriteFile(file, []byte("2.5h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := w.start(t, svc, func(r *job.Request) { r.ProgressFile = file })
	ctx := context.Background()
	if _, err := d.Review(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetJob(ctx, j.ID)
	if got.WorkDone != 2.5 {
		t.Errorf("work done %v, want the reported 2.5", got.WorkDone)
	}
	os.WriteFile(file, []byte("not a number"), 0o600)
	w.clk.Set(w.clk.Now().Add(10 * time.Minute))
	d.Review(ctx)
	got, _ = st.GetJob(ctx, j.ID)
	if !strings.Contains(string(got.Progress), "want the hours of work done") {
		t.Errorf("a bad report is not said: %s", got.Progress)
	}
	os.WriteFile(file, []byte("20"), 0o600)
	w.clk.Set(w.clk.Now().Add(10 * time.Minute))
	d.Review(ctx)
	got, _ = st.GetJob(ctx, j.ID)
	if got.State != ledger.JobDone {
		t.Errorf("reported done, job %s", got.State)
	}
	if a := w.fake.Active(); len(a) != 0 {
		t.Errorf("fleets left: %v", a)
	}
}

// A progress command's last line counts, however much it printed before.
func TestReportedProgressByCommand(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, d := w.process(t)
	j := w.start(t, svc, func(r *job.Request) {
		r.ProgressCommand = `i=0; while [ $i -lt 600 ]; do echo "step $i of a long log"; i=$((i+1)); done; echo 3.5h`
	})
	ctx := context.Background()
	if _, err := d.Review(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetJob(ctx, j.ID)
	if got.WorkDone != 3.5 {
		t.Errorf("work done %v, want the 3.5 the command's last line reports (progress %s)", got.WorkDone, got.Progress)
	}
}

// A progress file's last line counts, however long the log before it.
func TestReportedProgressFileTail(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, d := w.process(t)
	file := filepath.Join(t.TempDir(), "progress")
	log := strings.Repeat("a step of a long log\n", 600) + "4.5h\n"
	if err := os.WriteFile(file, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	j := w.start(t, svc, func(r *job.Request) { r.ProgressFile = file })
	ctx := context.Background()
	if _, err := d.Review(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetJob(ctx, j.ID)
	if got.WorkDone != 4.5 {
		t.Errorf("work done %v, want the 4.5 the file's last line reports (progress %s)", got.WorkDone, got.Progress)
	}
}
