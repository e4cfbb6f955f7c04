package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/planner"
)

// ReadTraces reads and checks every file; a missing or malformed one is a
// usage error naming it.
func ReadTraces(files []string) ([]planner.Trace, error) {
	out := make([]planner.Trace, 0, len(files))
	for _, name := range files {
		fh, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Usagef("--trace %s: no such file; want trace files (%s)", name, planner.TraceForm)
		}
		var t planner.Trace
		if err == nil {
			t, err = planner.ReadTrace(name, fh)
			fh.Close()
		}
		// The file's own errors name it; the trace's name its field.
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			return nil, Usagef("--trace %s: %v", name, pe.Err)
		case err != nil:
			return nil, Usagef("--%s", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// simTraceGap is the tick of the traces the simulated market writes: the
// public multi-node traces' 300 s.
const simTraceGap = 5 * time.Minute

// SimTraces records the simulated market's pools of instanceType (in the
// region filter) for days up to now, writes one file per pool to dir
// (default: a new one under the data dir) and says where.
func (a *App) SimTraces(instanceType string, days int, dir string) ([]planner.Trace, error) {
	e := a.s
	m := sim.New(sim.Options{Seed: e.Config.Sim.Seed})
	end := time.Now().UTC().Truncate(time.Hour)
	from := end.Add(-time.Duration(days) * 24 * time.Hour)
	ticks := int(end.Sub(from) / simTraceGap)
	if dir == "" {
		dir = filepath.Join(e.DataDir, "traces", fmt.Sprintf("sim-seed%d-%s-%s", e.Config.Sim.Seed, instanceType, end.Format("20060102T1504Z")))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write sim traces: %w", err)
	}
	var out []planner.Trace
	for _, p := range m.Pools(end) {
		if !strings.EqualFold(p.InstanceType, instanceType) {
			continue
		}
		if !e.Query.WantsRegion(p.Region) {
			continue
		}
		data, err := m.Capacity(p.Key(), from, simTraceGap, ticks)
		if err != nil {
			return nil, err
		}
		name := filepath.Join(dir, fmt.Sprintf("%s_%s_%s.json", p.Region, strings.ReplaceAll(p.Zone, "/", "-"), p.InstanceType))
		t := planner.Trace{Name: name, GapSeconds: int(simTraceGap / time.Second), Data: data}
		fh, err := os.Create(name)
		if err != nil {
			return nil, fmt.Errorf("write sim traces: %w", err)
		}
		werr := t.Write(fh)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write sim trace %s: %w", name, werr)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, Usagef("--instance-type %s: the simulated market has no pool of it in the region filter; want one such as p3.2xlarge, p5.48xlarge or g5.xlarge",
			instanceType)
	}
	fmt.Fprintf(a.errOut, "gpumarket: backtest: wrote %d traces of the simulated market (seed %d, %s, %d days to %s, %s ticks) to %s\n",
		len(out), e.Config.Sim.Seed, instanceType, days, end.Format(time.RFC3339), "5-minute", dir)
	return out, nil
}
