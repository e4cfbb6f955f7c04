package aws

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gpumarket/gpumarket/providers/advisor"
)

// advisorRetry is how long after a failed live fetch the provider waits
// before trying again: the advisor file changes a few times a day.
const advisorRetry = time.Hour

// maxAdvisorBytes bounds the live file (the real one is about 1 MB).
const maxAdvisorBytes = 32 << 20

type advisorState struct {
	data      *advisor.Data
	live      bool      // data came from the advisor URL (now or from the cache)
	fetched   time.Time // when the live data was fetched
	triedLive time.Time
}

// advisorData returns the interruption data to show and a note saying
// which one it is and how old: the live file (fetched within a day, from
// the data dir or now, with a short timeout), else the embedded snapshot.
func (p *Provider) advisorData(ctx context.Context) (*advisor.Data, string) {
	p.mu.Lock()
	st := p.adv
	p.mu.Unlock()
	now := p.opt.Now()
	if st.data != nil && (!st.live || now.Sub(st.fetched) < cacheTTL) && (st.live || now.Sub(st.triedLive) < advisorRetry || p.opt.AdvisorURL == "") {
		return st.data, advisorNote(st, now)
	}
	st = p.loadAdvisor(ctx, st, now)
	p.mu.Lock()
	p.adv = st
	p.mu.Unlock()
	return st.data, advisorNote(st, now)
}

func (p *Provider) loadAdvisor(ctx context.Context, st advisorState, now time.Time) advisorState {
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
		return advisorState{data: cached, live: true, fetched: cachedAt}
	}
	if p.opt.AdvisorURL != "" {
		st.triedLive = now
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
				return advisorState{data: d, live: true, fetched: now, triedLive: now}
			}
		}
		fallback := "the embedded 2025-06 snapshot"
		if cached != nil {
			fallback = "the cached copy of " + cachedAt.UTC().Format(time.RFC3339)
		}
		p.opt.Logger.Warn("spot advisor: live fetch failed, showing "+fallback, "url", p.opt.AdvisorURL, "err", err)
	}
	if cached != nil {
		return advisorState{data: cached, live: true, fetched: cachedAt, triedLive: st.triedLive}
	}
	return advisorState{data: advisor.Embedded(), triedLive: st.triedLive}
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

// advisorNote is the header's status line for the advisor data.
func advisorNote(st advisorState, now time.Time) string {
	if !st.live {
		return "spot advisor: " + st.data.Source
	}
	return "spot advisor: live, fetched " + ago(now.Sub(st.fetched))
}

// ago prints an age the way the header shows it: "12m ago", "3h ago".
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

func writeFile(path string, b []byte) error {
	return writeJSON(path, rawJSON(b))
}

// rawJSON marshals as itself, so writeJSON can store a file verbatim.
type rawJSON []byte

// MarshalJSON returns the bytes unchanged.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
