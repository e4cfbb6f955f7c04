package tui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/booking/bookingtest"
	"github.com/gpumarket/gpumarket/providers/store"
)

// regionErrs is the error a provider returns with the offerings of the
// regions that answered (booking.RegionErrors).
type regionErrs map[string]error

func (r regionErrs) Error() string {
	var parts []string
	for region, err := range r {
		parts = append(parts, region+": "+err.Error())
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func (r regionErrs) RegionErrors() map[string]error { return r }

// partialFinder answers a search with its offerings and, beside them, the
// regions that did not answer; with fail set it answers nothing.
type partialFinder struct {
	*bookingtest.Fake
	regions regionErrs
	fail    error
}

func (p partialFinder) FindOfferings(ctx context.Context, q providers.OfferingQuery) ([]providers.Offering, error) {
	if p.fail != nil {
		return nil, p.fail
	}
	offs, err := p.Fake.FindOfferings(ctx, q)
	if err != nil || len(p.regions) == 0 {
		return offs, err
	}
	return offs, p.regions
}

// partialSession is a booker's session over a provider "sim" two regions
// of which did not answer, and a provider "azure" that did not at all.
func partialSession(t *testing.T, w, h int) *Model {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := partialFinder{Fake: bookingtest.New("sim", bookingtest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000)).Simulated(),
		regions: regionErrs{
			"us-west-2":  errors.New("api error RequestLimitExceeded: Request limit exceeded."),
			"eu-north-1": fmt.Errorf("no answer within the search's time: %w", context.DeadlineExceeded),
		}}
	azure := partialFinder{Fake: bookingtest.New("azure"), fail: errors.New("azure capacity reservations: no subscription")}
	svc := booking.New(st, []providers.Provider{sim, azure}, booking.Options{Now: nowFn, Timeout: time.Second})
	m := newBare(Options{Now: nowFn, NoColor: true, Booking: svc, Actor: "local:tester"})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	return m
}

// TestBlocksShowsEveryRegionThatDidNotAnswer: a search that two regions
// of one provider and all of another did not answer shows the offerings
// of the rest and one line for each that did not — not only the
// providers that gave nothing.
func TestBlocksShowsEveryRegionThatDidNotAnswer(t *testing.T) {
	m := partialSession(t, 80, 24)
	showView(t, m, "Blocks")
	scr := flat(ansiStrip(m))
	for _, want := range []string{
		"sim eu-north-1: no answer within the search's time: context deadline exceeded",
		"sim us-west-2: api error RequestLimitExceeded: Request limit exceeded.",
		"azure: azure capacity reservations: no subscription",
		"3000.00",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("Blocks lacks %q:\n%s", want, ansiStrip(m))
		}
	}
	// In the providers' order, each one's regions sorted.
	if a, b, c := strings.Index(scr, "sim eu-north-1"), strings.Index(scr, "sim us-west-2"), strings.Index(scr, "azure: azure"); !(a < b && b < c) {
		t.Errorf("warnings out of order:\n%s", ansiStrip(m))
	}
	for _, l := range strings.Split(ansiStrip(m), "\n") {
		if cellWidth(l) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
}

// TestPlanSaysWhichRegionsDidNotAnswer: the plan, made without the
// offerings of the regions that did not answer, names each of them.
func TestPlanSaysWhichRegionsDidNotAnswer(t *testing.T) {
	m := partialSession(t, 160, 40)
	showView(t, m, "Plan")
	var p *planView
	for _, v := range m.views {
		if x, ok := v.(*planView); ok {
			p = x
		}
	}
	p.runs = testRuns
	p.form.gpus, p.form.hours, p.form.start, p.form.deadline = "8", "24", "2026-11-24 09:00", "2026-11-26 14:00"
	press(m, "r")
	scr := flat(ansiStrip(m))
	for _, want := range []string{"sim eu-north-1: offerings of H100", "sim us-west-2: offerings of H100", "azure: offerings of H100",
		"(the plan is made without its offerings)"} {
		if !strings.Contains(scr, want) {
			t.Errorf("Plan lacks %q:\n%s", want, ansiStrip(m))
		}
	}
}

func ansiStrip(m *Model) string { return ansi.Strip(m.View().Content) }
