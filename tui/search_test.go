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

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// regionErrs is the error a provider returns with the offerings of the
// regions that answered (ledger.RegionErrors).
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
	*ledgertest.Fake
	regions regionErrs
	fail    error
}

func (p partialFinder) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
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
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := partialFinder{Fake: ledgertest.New("sim", ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000)).Simulated(),
		regions: regionErrs{
			"us-west-2":  errors.New("api error RequestLimitExceeded: Request limit exceeded."),
			"eu-north-1": fmt.Errorf("no answer within the search's time: %w", context.DeadlineExceeded),
		}}
	azure := partialFinder{Fake: ledgertest.New("azure"), fail: errors.New("azure capacity reservations: no subscription")}
	svc := ledger.New(st, []domain.Provider{sim, azure}, ledger.Options{Now: nowFn, Timeout: time.Second})
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

// recordingFinder remembers the queries it is asked.
type recordingFinder struct {
	*ledgertest.Fake
	asked *[]domain.OfferingQuery
}

func (r recordingFinder) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	*r.asked = append(*r.asked, q)
	return r.Fake.FindOfferings(ctx, q)
}

// TestBlocksShowsOtherLengthsAndHourlyRates: the
// form's "Other lengths" asks for blocks within it of the duration too;
// they are listed after those of the asked length, their HOURS marked ~.
// A reservation billed by the hour shows its rate in a $/H column beside
// its total, at 80 columns too; the footnote says what both mean.
func TestBlocksShowsOtherLengthsAndHourlyRates(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := fixedNow.Add(24 * time.Hour)
	short := ledgertest.Offering("sim", "cb-43h", start, 43, 1, 1000)
	short.FlexLength = true
	res := ledgertest.Offering("sim", "azcr-res", fixedNow, 48, 1, 4800)
	res.Cloud, res.Region, res.Zone, res.InstanceType = domain.CloudAzure, "eastus", "2", "Standard_ND96isr_H100_v5"
	res.StartsOnPurchase, res.Kind, res.HourlyUSD = true, domain.KindReservation, 100
	var asked []domain.OfferingQuery
	fake := recordingFinder{Fake: ledgertest.New("sim", ledgertest.Offering("sim", "cb-48h", start, 48, 1, 3000), short, res).Simulated(), asked: &asked}
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: nowFn, Timeout: time.Second})
	m := newBare(Options{Now: nowFn, NoColor: true, Booking: svc, Actor: "local:tester"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	showView(t, m, "Blocks")
	press(m, "e", "up", "6", "h", "enter") // up from GPU wraps to Other lengths
	if n := len(asked); n != 2 || asked[1].FlexDuration != 6*time.Hour || asked[1].Duration != 48*time.Hour {
		t.Fatalf("queries %+v: want the second with a 6 h flexible length", asked)
	}
	scr := ansiStrip(m)
	lines := strings.Split(scr, "\n")
	row := func(substr string) string {
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return l
			}
		}
		t.Fatalf("no row with %q:\n%s", substr, scr)
		return ""
	}
	if !strings.Contains(row("$/GPU-h UPFRONT"), "$/H") || !strings.Contains(row("$/GPU-h UPFRONT"), "HOURS") {
		t.Fatalf("header lacks $/H or HOURS:\n%s", scr)
	}
	if r := row("4800.00"); !strings.Contains(r, " 100.0 ") || !strings.Contains(r, " 48 ") {
		t.Errorf("the reservation's row %q: want its total, its $/H and its hours", r)
	}
	if r := row("1000.00"); !strings.Contains(r, " 43~ ") {
		t.Errorf("the 43 h block's row %q: want its hours marked", r)
	}
	// The asked length first, though the 43 h block is cheaper per GPU-hour.
	if strings.Index(scr, "3000.00") > strings.Index(scr, "1000.00") {
		t.Errorf("the 43 h block is listed above the 48 h one:\n%s", scr)
	}
	flatScr := flat(scr)
	for _, want := range []string{"for 2d (or within 6h)", "$/H: what a reservation bills an hour until deleted", "~: a length other than the duration asked"} {
		if !strings.Contains(flatScr, want) {
			t.Errorf("Blocks lacks %q:\n%s", want, scr)
		}
	}
	for _, l := range lines {
		if cellWidth(l) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
	// The confirmation of the 43 h block says it is not the length asked.
	press(m, "down", "down", "b")
	if !strings.Contains(flat(ansiStrip(m)), "length: 43 h, not the length searched for") {
		t.Errorf("confirmation of the 43 h block:\n%s", ansiStrip(m))
	}
	press(m, "esc")
	// A length not less than the duration is refused, naming the field.
	press(m, "e", "up", "backspace", "backspace", "2", "d", "enter")
	if !strings.Contains(flat(ansiStrip(m)), `other lengths "2d": want whole hours, days or weeks less than the duration`) || len(asked) != 2 {
		t.Errorf("other lengths of 2d for a 2d search: %d searches\n%s", len(asked), ansiStrip(m))
	}
}
