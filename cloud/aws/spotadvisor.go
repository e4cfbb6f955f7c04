package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/domain"
)

// advisorRetry: the advisor file changes a few times a day.
const advisorRetry = time.Hour

// maxAdvisorBytes bounds the live file (the real one is about 1 MB).
const maxAdvisorBytes = 32 << 20

type advisorState struct {
	data      *advisor.Data
	live      bool      // data came from the advisor URL (now or from the cache)
	fetched   time.Time // when the live data was fetched
	triedLive time.Time
	// failed is why the last live fetch failed, said until the next try.
	failed string
}

// advisorJob is a fetch's interruption data: what shows at once, and the live file's when fetched beside.
type advisorJob struct {
	done chan struct{}
	// first: the data held, else the embedded snapshot (parsed once, tens of ms).
	first func() *advisor.Data
	data  *advisor.Data // once done
	note  string        // once done
}

func (j *advisorJob) current() *advisor.Data {
	select {
	case <-j.done:
		return j.data
	default:
		return j.first()
	}
}

func (j *advisorJob) wait(ctx context.Context) *advisor.Data {
	select {
	case <-j.done:
		return j.data
	case <-ctx.Done():
		return j.first()
	}
}

// startAdvisor picks the interruption data (the live file within a day, else the
// embedded snapshot) and sends the note saying which; the live fetch runs beside.
func (p *Provider) startAdvisor(ctx context.Context, sink domain.Sink, note func(string) string) *advisorJob {
	p.mu.Lock()
	st := p.adv
	p.mu.Unlock()
	now := p.opt.Now()
	held := st.data
	job := &advisorJob{done: make(chan struct{}), first: sync.OnceValue(func() *advisor.Data {
		if held != nil {
			return held
		}
		return advisor.Embedded()
	})}
	go job.first()
	finish := func(st advisorState) {
		job.data, job.note = st.data, advisorNote(st, now)
		// Sent now: nothing reaches the sink after Fetch returns.
		sink(domain.Event{Provider: Name, Note: note(job.note)})
		close(job.done)
	}
	if st.data != nil && (!st.live || now.Sub(st.fetched) < cacheTTL) && (st.live || now.Sub(st.triedLive) < advisorRetry || p.opt.AdvisorURL == "") {
		finish(st)
		return job
	}
	go func() {
		next, tried := p.loadAdvisor(ctx, st, now)
		if !tried {
			next.data = job.first()
			finish(next)
			return
		}
		p.mu.Lock()
		p.adv = next
		p.mu.Unlock()
		finish(next)
	}()
	return job
}

func (p *Provider) loadAdvisor(ctx context.Context, st advisorState, now time.Time) (advisorState, bool) {
	before := st
	path := p.cachePath("spot-advisor.json")
	var cached *advisor.Data
	var cachedAt time.Time
	if path != "" {
		if fi, err := os.Stat(path); err == nil {
			if b, err := os.ReadFile(path); err == nil {
				if d, err := advisor.Parse(b, "live, cached", fi.ModTime()); err == nil {
					cached, cachedAt = d, fi.ModTime()
				}
			}
		}
	}
	if cached != nil && now.Sub(cachedAt) < cacheTTL {
		return advisorState{data: cached, live: true, fetched: cachedAt}, true
	}
	if p.opt.AdvisorURL != "" {
		st.triedLive = now
		st.failed = ""
		b, err := p.fetchAdvisor(ctx)
		if err == nil {
			var d *advisor.Data
			d, err = advisor.Parse(b, "live", now)
			if err == nil {
				if path != "" {
					if werr := writeFile(path, b); werr != nil {
						p.opt.Logger.Warn("cache spot advisor", "err", werr)
					}
				}
				return advisorState{data: d, live: true, fetched: now, triedLive: now}, true
			}
		}
		if errors.Is(err, context.Canceled) {
			// The fetch ended before the file came: tried next time.
			return before, false
		}
		// Said once in the note; details in the log for --debug.
		st.failed = advisorFailure(err)
		p.opt.Logger.Debug("spot advisor: live fetch failed", "url", p.opt.AdvisorURL, "err", err)
	}
	if cached != nil {
		return advisorState{data: cached, live: true, fetched: cachedAt, triedLive: st.triedLive, failed: st.failed}, true
	}
	return advisorState{data: advisor.Embedded(), triedLive: st.triedLive, failed: st.failed}, true
}

func advisorFailure(err error) string {
	if cause, ok := unreachableCause(err); ok {
		return cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	s := shortCause(err)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func (p *Provider) fetchAdvisor(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opt.AdvisorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.opt.AdvisorURL, nil)
	if err != nil {
		return nil, fmt.Errorf("spot advisor url %q: %w", p.opt.AdvisorURL, err)
	}
	resp, err := p.opt.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch spot advisor: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch spot advisor: %s answered %s", p.opt.AdvisorURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAdvisorBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch spot advisor: %w", err)
	}
	if len(b) > maxAdvisorBytes {
		return nil, fmt.Errorf("fetch spot advisor: answer larger than %d MiB", maxAdvisorBytes>>20)
	}
	return b, nil
}

// advisorNote is the status line: which data, how old, and why not live
// ("spot advisor: embedded 2025-06 (live fetch failed: connection refused)").
func advisorNote(st advisorState, now time.Time) string {
	note := "spot advisor: " + st.data.Source
	if st.live {
		note = "spot advisor: live, fetched " + ago(now.Sub(st.fetched))
	}
	if st.failed != "" {
		note += " (live fetch failed: " + st.failed + ")"
	}
	return note
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// noteNow is the job's note when done, else the held data's.
func (j *advisorJob) noteNow() string {
	select {
	case <-j.done:
		return j.note
	default:
		return "spot advisor: " + j.first().Source
	}
}
