package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// Reachable builds the query's sources, leaving out with a warning one that
// cannot be built while another can; when none can, it says why of each.
func (a *App) Reachable(ctx context.Context) (ps []domain.Provider, down []Warning, err error) {
	q := a.s.Query
	if err := a.table.CheckRegions(q.Providers, q.Regions); err != nil {
		return nil, nil, err
	}
	for _, name := range q.Providers {
		p, err := a.Provider(ctx, name)
		var ue *UsageError
		switch {
		case errors.As(err, &ue):
			return nil, nil, err
		case err != nil:
			down = append(down, Warning{Provider: name, Cause: Unprefixed(name, err.Error()), err: err})
		default:
			ps = append(ps, p)
		}
	}
	switch {
	case len(ps) > 0 || len(down) == 0:
		return ps, down, nil
	case len(down) == 1:
		return nil, nil, down[0].err
	}
	health{warnings: down}.write(a.errOut, 0)
	return nil, nil, errors.New("no source could be reached")
}

// ReadySnapshot runs the hub until every source's first back-fill or timeout,
// warning of each that failed; one bad region never blanks the others' rows.
func (a *App) ReadySnapshot(ctx context.Context, timeout time.Duration) (*feed.Snapshot, error) {
	return a.readySnapshot(ctx, timeout, false)
}

func (a *App) readySnapshot(ctx context.Context, timeout time.Duration, modelsSaid bool) (*feed.Snapshot, error) {
	ps, down, err := a.Reachable(ctx)
	if err != nil {
		return nil, err
	}
	return a.Ready(ctx, a.HubOver(ps), timeout, modelsSaid, down)
}

// Ready waits for h's first back-fill of every source, or timeout, and says
// what became of every region asked (down: sources left out); modelsSaid
// leaves out empty answers the command names itself.
func (a *App) Ready(ctx context.Context, h *feed.Hub, timeout time.Duration, modelsSaid bool, down []Warning) (*feed.Snapshot, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	snap, err := h.WaitReady(wctx)
	if err != nil {
		// Cancelled, or the hub stopped: no partial answer is wanted.
		if snap == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("wait for the sources: %w", err)
		}
	}
	rep := healthOf(snap, a.s.Query, descriptors(h.Providers()))
	rep.cacheFile = feed.Path(a.s.DataDir)
	if modelsSaid {
		rep.warnings = slices.DeleteFunc(rep.warnings, func(x Warning) bool { return x.empty != "" })
	}
	rep.warnings = append(down, rep.warnings...)
	rep.write(a.errOut, timeout)
	switch {
	case rep.answered:
		return snap, nil
	case !snap.Ready:
		return nil, fmt.Errorf("no source or region answered within --timeout %s (raise --timeout)", domain.FormatDuration(timeout))
	}
	return nil, errors.New("no source or region answered")
}

// health is what a snapshot says of the sources a one-shot command asked.
type health struct {
	notes     []string // "aws: advisor data from …"
	warnings  []Warning
	answered  bool
	cacheFile string // the history cache, named when rows come from it
}

// Warning is one line of stderr about a source or one of its regions.
type Warning struct {
	Provider string
	region   string
	Cause    string    // the failure; "" when it had not answered or answered empty
	err      error     // the failure as the provider's constructor gave it
	partial  bool      // still loading but some prices came; its rows are printed
	empty    string    // what the region answered with none of
	example  string    // a region name of the provider, for an empty answer
	cachedAt time.Time // when the history cache last heard from the region
}

// healthOf accounts for every region the query names that a source has.
func healthOf(snap *feed.Snapshot, q domain.Query, desc map[string]domain.Descriptor) health {
	var h health
	// A region that sent prices then failed a part has answered.
	priced := map[[2]string]bool{}
	pooled := map[[2]string]bool{}
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !q.Matches(pv.Pool) {
			continue
		}
		k := [2]string{pv.Provider, pv.Region}
		pooled[k] = true
		if pv.History.Len() > 0 {
			priced[k] = true
		}
	}
	for _, src := range snap.Sources {
		name := src.Provider
		if src.Note != "" && !src.Simulated {
			h.notes = append(h.notes, name+": "+Unprefixed(name, src.Note))
		}
		if src.Err != "" && !everyRegionFailed(src) {
			h.warnings = append(h.warnings, Warning{Provider: name, Cause: Unprefixed(name, src.Err)})
		}
		loading := src.State == feed.StateLoading
		seen := map[string]bool{}   // regions the source reported on
		failed := map[string]bool{} // … that failed or were still loading
		okRegions, late := 0, 0
		for _, r := range src.Regions {
			seen[r.Region] = true
			k := [2]string{name, r.Region}
			switch {
			case r.Err != "":
				failed[r.Region] = true
				w := Warning{Provider: name, region: r.Region, Cause: Unprefixed(name, r.Err)}
				if priced[k] {
					h.answered = true
					w.cachedAt = r.CachedAt
				}
				h.warnings = append(h.warnings, w)
			case loading && !(r.Total > 0 && r.Done >= r.Total):
				failed[r.Region] = true
				late++
				h.warnings = append(h.warnings, Warning{Provider: name, region: r.Region, partial: priced[k]})
				if priced[k] {
					h.answered = true
				}
			default:
				okRegions++
			}
		}
		// Every named region is accounted for; an empty answer is named, as clouds
		// answer so for a name they do not know.
		d, known := desc[name]
		for _, r := range q.Regions {
			if (known && !d.KnowsRegion(r)) || failed[r] || pooled[[2]string{name, r}] {
				continue
			}
			switch {
			case loading && !seen[r]:
				late++
				h.warnings = append(h.warnings, Warning{Provider: name, region: r})
			case src.State == feed.StateReady || loading:
				h.warnings = append(h.warnings, Warning{Provider: name, region: r, empty: emptyWhat(q), example: d.RegionExample})
			}
		}
		if loading && late == 0 {
			// Still loading with no region late: say the source had not finished.
			h.warnings = append(h.warnings, Warning{Provider: name, partial: okRegions > 0})
		}
		if okRegions > 0 || (len(src.Regions) == 0 && src.State == feed.StateReady && src.Err == "") {
			h.answered = true
		}
	}
	return h
}

// everyRegionFailed reports whether the source had regions and all failed.
func everyRegionFailed(src feed.SourceStatus) bool {
	for _, r := range src.Regions {
		if r.Err == "" {
			return false
		}
	}
	return len(src.Regions) > 0
}

// emptyWhat names what an empty answer had none of.
func emptyWhat(q domain.Query) string {
	if len(q.GPUs) == 0 {
		return "GPU pools"
	}
	return strings.Join(q.GPUs, " or ") + " pools"
}

// write prints the notes, then the warnings, one line each.
func (h health) write(w io.Writer, timeout time.Duration) {
	for _, n := range h.notes {
		fmt.Fprintf(w, "gpumarket: %s\n", n)
	}
	for _, x := range h.warnings {
		line := x.line(timeout)
		if !x.cachedAt.IsZero() {
			line += fmt.Sprintf("; its rows are cached prices as of %s, from %s", LocalStamp(x.cachedAt), h.cacheFile)
		}
		fmt.Fprintf(w, "gpumarket: warning: %s\n", line)
	}
}

// line words the warning: who, then what happened.
func (x Warning) line(timeout time.Duration) string {
	who := x.Provider
	if x.region != "" {
		who += " " + x.region
	}
	switch {
	case x.Cause != "":
		return who + ": " + x.Cause
	case x.empty != "" && x.example != "":
		return fmt.Sprintf("%s: answered with no %s: none sold there, or no %s region of that name (such as %s)", who, x.empty, x.Provider, x.example)
	case x.empty != "":
		return fmt.Sprintf("%s: answered with no %s: none sold there, or no %s region of that name", who, x.empty, x.Provider)
	case x.region == "" && x.partial:
		return fmt.Sprintf("%s: had not finished within --timeout %s: the rows show what it had sent (a region it had not reported on is missing)", who, domain.FormatDuration(timeout))
	case x.partial:
		return fmt.Sprintf("%s: had not finished within --timeout %s: its rows may lack part of the window", who, domain.FormatDuration(timeout))
	}
	return fmt.Sprintf("%s: did not answer within --timeout %s", who, domain.FormatDuration(timeout))
}

// Unprefixed is a source's message on one line, its "aws: " and URL queries
// cut (an Azure price filter names every VM size).
func Unprefixed(provider, msg string) string {
	return quotedURLQuery.ReplaceAllString(strings.TrimPrefix(FirstLine(msg), provider+": "), `"$1?…"`)
}

// quotedURLQuery matches a quoted URL with a query.
var quotedURLQuery = regexp.MustCompile(`"(https?://[^"?\s]*)\?[^"\s]*"`)

// CheckModelsSold refuses, before any offering search, a --gpu model no pool
// of the market sells within the filters. (The hub fetched only the --gpu
// models, so what else is sold is not known here.)
func (s *Settings) CheckModelsSold(snap *feed.Snapshot, models []string) error {
	sold := map[string]bool{}
	for i := range snap.Pools {
		if pv := &snap.Pools[i]; s.Query.Matches(pv.Pool) && !pv.Restricted {
			sold[pv.GPU.Model] = true
		}
	}
	for _, g := range models {
		if !sold[g] {
			where := "the market"
			if len(s.Query.Regions) > 0 {
				where += " in " + strings.Join(s.Query.Regions, ",")
			}
			return Usagef("--gpu %s: no pool of %s sells %s; want a GPU it sells (see `gpumarket prices`), or another --region or --provider",
				strings.Join(models, ","), where, g)
		}
	}
	return nil
}
