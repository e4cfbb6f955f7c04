package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/tui/widget/form"
	"github.com/gpumarket/gpumarket/watch"
)

type (
	offersMsg struct {
		seq int
		res ledger.Search
		err error
	}
	// bookedMsg follows a purchase; row is the ledger row of one that went through.
	bookedMsg struct{ row ledger.Entry }
)

type blocksKeys struct {
	listKeys
	Book, Form, Search, Plan, Alert key.Binding
}

type blocksForm struct {
	gpu       string
	size      string
	instances bool // size counts instances, else GPUs
	duration  string
	after     string
	before    string
	flex      string // OfferingQuery.FlexDuration; empty: the duration only
}

func (f *blocksForm) fields() []form.Field {
	return []form.Field{form.Pick("GPU", domain.GPUModels, &f.gpu), form.Text("How many", &f.size),
		form.Toggle("Counting", "GPUs", "instances", &f.instances), form.Text("Duration", &f.duration),
		form.Text("Earliest start", &f.after).Empty("now"), form.Text("Latest start", &f.before).Empty("as far as sold"),
		form.Text("Other lengths", &f.flex).Empty("none")}
}

// parse turns the form into a query, naming the wrong field.
func (f blocksForm) parse(now time.Time) (domain.OfferingQuery, error) {
	q := domain.OfferingQuery{GPU: f.gpu}
	n, err := strconv.Atoi(strings.TrimSpace(f.size))
	most := domain.CapacityBlockTerms.MaxInstances
	if err != nil || n < 1 || n > most*8 {
		return q, fmt.Errorf("size %q: want a whole number from 1", f.size)
	}
	if f.instances {
		if n > most {
			return q, fmt.Errorf("size %d: a block holds at most %d instances", n, most)
		}
		q.Instances = n
	} else {
		q.GPUs = n
	}
	// Blocks run longer than a history window (AWS: up to 26 weeks).
	if q.Duration, err = domain.ParseSpan(f.duration, "hdw", domain.CapacityBlockTerms.MaxDuration); err != nil {
		return q, fmt.Errorf("duration %q: want whole hours, days or weeks such as 8h, 2d, 1w, at most 26w", f.duration)
	}
	for _, b := range []struct {
		s    string
		t    *time.Time
		name string
	}{{f.after, &q.StartAfter, "earliest start"}, {f.before, &q.StartBefore, "latest start"}} {
		s := strings.TrimSpace(b.s)
		if s == "" {
			continue
		}
		t, err := domain.ParseWhen(s, now)
		if err != nil {
			return q, fmt.Errorf("%s %q: want %s", b.name, s, domain.WhenForm)
		}
		*b.t = t
	}
	if !q.StartAfter.IsZero() && !q.StartBefore.IsZero() && !q.StartBefore.After(q.StartAfter) {
		return q, errors.New("the latest start is not after the earliest")
	}
	if s := strings.TrimSpace(f.flex); s != "" {
		if q.FlexDuration, err = domain.ParseSpan(s, "hdw", domain.CapacityBlockTerms.MaxDuration); err != nil || q.FlexDuration >= q.Duration {
			return q, fmt.Errorf("other lengths %q: want whole hours, days or weeks less than the duration, such as 20h; empty: the duration only", s)
		}
	}
	return q, nil
}

type blocksView struct {
	actingView
	svc  *ledger.Service
	keys blocksKeys

	form  blocksForm
	terms blocksForm // as last searched: the summary over the table says them

	offers []domain.Offering
	// alts memoizes each block's spot alternative for altsOf: one scans every pool.
	alts      map[altKey]present.SpotAlt
	altsOf    *feed.Snapshot
	warnings  []ledger.Warning // who did not answer the last search
	searched  bool
	searching bool
	at        time.Time
	cur       int
	seq       int // of the latest search
}

// newBlocksView searches for the session's first GPU filter, else H100.
func newBlocksView(c *common, ctx context.Context, svc *ledger.Service, gpus []string) *blocksView {
	k := blocksKeys{
		Book:   key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "book")),
		Form:   key.NewBinding(key.WithKeys("e", "/"), key.WithHelp("e or /", "edit search")),
		Search: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "search again")),
		Plan:   key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "plan this job")),
		Alert:  key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "alert rule")),
	}
	short := []key.Binding{k.Book, k.Form, k.Search, k.Plan}
	k.listKeys = newListKeys(&c.keys, false, short, append(short, k.Alert))
	v := &blocksView{actingView: actingView{base: base{c: c, ctx: ctx}}, svc: svc, keys: k,
		form: blocksForm{gpu: "H100", size: "8", duration: "2d"}}
	if len(gpus) > 0 {
		if g, ok := domain.CanonicalGPU(gpus[0]); ok {
			v.form.gpu = g
		}
	}
	v.confirm = v.confirmation(svc != nil)
	return v
}

func (v *blocksView) Title() string { return "Blocks" }
func (v *blocksView) KeyMap() help.KeyMap {
	return v.keyMap(v.keys, "change", "search", "back to the last search")
}

func (v *blocksView) helpNote() string {
	return "A capacity block is paid up front and never interrupted. SPOT ALT is the cheapest spot pool for the same GPUs and hours, " +
		"priced as EFF: what a job of the block's GPUs and hours pays per useful GPU-hour there, given its interruptions (config plan.*)."
}

// shown starts the first search, a viewer's on r only (docs/DESIGN.md, The TUI).
func (v *blocksView) shown() tea.Cmd {
	if v.searched || v.c.role == RoleViewer {
		return nil
	}
	return v.search()
}

func (v *blocksView) search() tea.Cmd {
	if v.svc == nil {
		return nil
	}
	q, err := v.form.parse(v.c.now())
	if err != nil {
		v.formErr = err.Error()
		return nil
	}
	v.formErr = ""
	v.terms = v.form
	v.seq++
	v.searching, v.searched = true, true
	seq, ctx, svc := v.seq, v.ctx, v.svc
	return v.task(func() tea.Msg {
		res, err := svc.FindOfferings(ctx, q)
		return offersMsg{seq: seq, res: res, err: err}
	})
}

func (v *blocksView) Update(msg tea.Msg) (view, tea.Cmd) {
	return v, v.update(msg, v.search, v.updateKey, func(msg tea.Msg) tea.Cmd {
		switch msg := msg.(type) {
		case offersMsg:
			return v.found(msg)
		case bookedMsg:
			return v.search()
		}
		return nil
	})
}

func (v *blocksView) found(msg offersMsg) tea.Cmd {
	if msg.seq != v.seq {
		return nil // an older search
	}
	v.searching = false
	v.offers, v.warnings, v.at = msg.res.Offerings, msg.res.Warnings, msg.res.At
	v.cur = min(v.cur, max(len(v.offers)-1, 0))
	if msg.err != nil {
		return notifyErr(msg.err)
	}
	return nil
}

func (v *blocksView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case v.keys.move(msg, &v.cur, len(v.offers)):
	case key.Matches(msg, v.keys.Form):
		v.open(v.form.fields())
	case key.Matches(msg, v.keys.Search):
		return v.search()
	case key.Matches(msg, v.keys.Book):
		return v.confirm.offer(v.buyBlock)
	case key.Matches(msg, v.keys.Plan):
		seed := v.planSeed()
		return func() tea.Msg { return openPlanMsg{seed: seed} }
	case key.Matches(msg, v.keys.Alert):
		return v.prompt.offer(v.c, v.makeBlockRule)
	}
	return nil
}

// shownTerms are the terms over the table: as last searched, else the form's.
func (v *blocksView) shownTerms() blocksForm {
	if v.searched {
		return v.terms
	}
	return v.form
}

// planSeed is the search as a job; an instance counts 8 GPUs unless known.
func (v *blocksView) planSeed() planSeed {
	t := v.shownTerms()
	s := planSeed{models: []string{t.gpu}, start: strings.TrimSpace(t.after), latest: strings.TrimSpace(t.before)}
	if n, err := strconv.Atoi(strings.TrimSpace(t.size)); err == nil && n > 0 {
		if t.instances {
			per := 8.0
			if v.cur < len(v.offers) && v.offers[v.cur].GPU.Count > 0 {
				per = v.offers[v.cur].GPU.Count
			}
			n = int(float64(n) * per)
		}
		s.gpus = strconv.Itoa(n)
	}
	if d, err := domain.ParseSpan(t.duration, "hdw", domain.CapacityBlockTerms.MaxDuration); err == nil {
		s.hours = d.Hours()
	}
	return s
}

func (v *blocksView) buyBlock() (*moneyAction, tea.Cmd) {
	if v.cur >= len(v.offers) {
		return nil, notifyHere("no offering selected: search first (e)")
	}
	return buyAction(v.svc, v.c.actor, v.offers[v.cur], v.c.now(), nil, 0), nil
}

// buyAction buys an offering as shown (on changed terms when changed is set),
// after the budget and a dry run; quoted counts renewals in a row.
func buyAction(svc *ledger.Service, actor string, o domain.Offering, now time.Time, changed *ledger.TermsChangedError, quoted int) *moneyAction {
	a := &moneyAction{
		title: fmt.Sprintf("Buy this %s for $%.2f?", o.Terms().Name, o.UpfrontUSD), verb: "buy",
		lines:    offeringLines(o, now),
		checking: "checking the budget and asking the provider for a dry run", sending: "buying",
	}
	if changed != nil {
		a.title = termsTitle(o, changed)
		a.lines = append([]string{termsChange(changed)}, a.lines...)
	}
	a.quote = func(ctx context.Context) quoteAnswer {
		q, err := svc.Quote(ctx, o.ID)
		if q.Offering.ID != "" && !ledger.SameTerms(o, q.Offering) {
			return renewBuy(svc, actor, o, now, changed, &ledger.TermsChangedError{Shown: o, Now: q.Offering, Why: "a later search re-priced it"}, quoted)
		}
		if err != nil {
			return quoteAnswer{err: err}
		}
		dry, err := svc.Book(ctx, ledger.BookRequest{OfferingID: o.ID, DryRun: true, Confirmed: o})
		if tc, ok := errors.AsType[*ledger.TermsChangedError](err); ok {
			return renewBuy(svc, actor, o, now, changed, tc, quoted)
		}
		if err != nil {
			return quoteAnswer{err: fmt.Errorf("the dry run was refused: %w", err)}
		}
		return quoteAnswer{dryRun: cmp.Or(dryRunAnswer(dry.Booking.Message), "the provider says the purchase would succeed")}
	}
	a.send = func(ctx context.Context) outcome {
		res, err := svc.Book(ctx, ledger.BookRequest{OfferingID: o.ID, Actor: actor, Confirmed: o})
		if tc, ok := errors.AsType[*ledger.TermsChangedError](err); ok {
			// The provider's no, not the user's: ask again in the same box.
			return outcome{renewed: buyAction(svc, actor, tc.Now, now, tc, 0)}
		}
		r := res.Row
		then := bookedMsg{}
		if err == nil {
			then.row = r
		}
		return outcome{err: err, then: then,
			notice: fmt.Sprintf("booked %s: %s, $%.2f (ledger row %s) — see the Ledger view", r.ProviderRef, r.State, r.CostUSD, short(r.ID))}
	}
	return a
}

func offeringLines(o domain.Offering, now time.Time) []string {
	loc := now.Location()
	sim := ""
	if o.Simulated {
		sim = "  (SIMULATED MARKET: nothing real is bought)"
	}
	lines := []string{
		o.CostTerms() + sim,
		fmt.Sprintf("%d × %s (%s GPUs: %s) in %s %s · %s", o.InstanceCount, o.InstanceType, present.GPUCount(o.GPUCount()), o.GPU.Model, o.Region, o.Zone, o.Provider),
		fmt.Sprintf("start  %s   (%s UTC)", o.Start.In(loc).Format("Mon 2006-01-02 15:04 MST"), o.Start.UTC().Format("2006-01-02 15:04")),
		fmt.Sprintf("end    %s   (%s UTC) · %g h", o.End.In(loc).Format("Mon 2006-01-02 15:04 MST"), o.End.UTC().Format("2006-01-02 15:04"), o.HeldHours()),
		"offering " + o.ID,
	}
	if o.FlexLength {
		lines = append(lines, fmt.Sprintf("length: %g h, not the length searched for (listed by the form's other lengths)", o.HeldHours()))
	}
	lines = append(lines, o.PlanTerms()...)
	if o.Note != "" {
		lines = append(lines, "note: "+o.Note)
	}
	return lines
}

// blocksColumnsFor drops $/H when nothing bills by the hour (it takes ALT
// TOTAL's place at 80 columns) and KIND when all are capacity blocks.
func blocksColumnsFor(offers []domain.Offering) []*present.Col[*present.OfferingRow] {
	hourly, kinds := false, false
	for _, o := range offers {
		hourly = hourly || o.HourlyUSD > 0
		kinds = kinds || o.Terms().Kind != domain.KindBlock
	}
	out := make([]*present.Col[*present.OfferingRow], 0, len(present.BlocksView))
	for _, c := range present.BlocksView {
		if (c != present.OfferHourly || hourly) && (c != present.OfferKind || kinds) {
			out = append(out, c)
		}
	}
	return out
}

// formHints say what each field of fields takes, in its order.
func (v *blocksView) formHints() []string {
	now := v.c.now()
	// 11:30 UTC in the session's zone, the hour AWS blocks start and end.
	utc := now.UTC()
	startAt := time.Date(utc.Year(), utc.Month(), utc.Day(), 0, 0, 0, 0, time.UTC).Add(domain.CapacityBlockTerms.StartOfDayUTC).In(now.Location()).Format("15:04 MST")
	return []string{
		"←/→ change",
		"a whole number",
		fmt.Sprintf("←/→ GPUs or instances (a block holds 1-%d instances)", domain.CapacityBlockTerms.MaxInstances),
		"8h, 2d, 1w · AWS blocks: whole days 1d-14d, then weeks to 26w · Azure: any hours",
		domain.WhenExample(now) + " (local), tomorrow 09:00, +6h, +2d · AWS blocks start at " + startAt,
		"the same forms; empty: as far ahead as sold (AWS: 8 weeks)",
		"such as 20h: AWS also sells blocks a little shorter or longer than asked (ending at 11:30 UTC); those within this of the duration are listed too, after the others, their HOURS marked ~; empty: the duration only",
	}
}

// blocksFormHelp is said under the Blocks form.
const blocksFormHelp = "AWS capacity blocks start and end at 11:30 UTC, last whole days (1-14, then weeks), are paid up front and " +
	"stop their instances 30 minutes before the end: to hold GPUs for 09:00-17:00, ask for a block that starts " +
	"by 09:00 (latest start) and ends after 17:00. Azure capacity reservations start when bought, take any hours, " +
	"and bill by the hour until deleted. Both show beside the cheapest spot pool for the same GPUs and hours."

type altKey struct {
	model       string
	gpus, hours float64
}

func (v *blocksView) spotAlternativeOnce(o domain.Offering) (present.SpotAlt, bool) {
	if v.altsOf != v.snap || v.alts == nil {
		v.alts, v.altsOf = map[altKey]present.SpotAlt{}, v.snap
	}
	k := altKey{strings.ToUpper(o.GPU.Model), o.GPUCount(), o.DurationHours()}
	a, ok := v.alts[k]
	if !ok {
		a, _ = v.spotAlternative(o)
		v.alts[k] = a
	}
	return a, a.Pool != nil
}

// spotAlternative is the pool of the block's GPU with the lowest EFF for its job.
func (v *blocksView) spotAlternative(o domain.Offering) (present.SpotAlt, bool) {
	best := present.SpotAlt{Effective: math.Inf(1)}
	if v.snap == nil {
		return best, false
	}
	gpus := o.GPUCount()
	for i := range v.snap.Pools {
		pv := &v.snap.Pools[i]
		if !strings.EqualFold(pv.GPU.Model, o.GPU.Model) || pv.GPU.Count <= 0 {
			continue
		}
		_, usd, ok := pv.History.Last()
		if !ok {
			continue
		}
		b := v.c.eff
		b.GPUs, b.Hours = int(math.Ceil(gpus)), o.HeldHours()
		// NaN (the price or GPU count is unknown) is never below the best.
		eff := present.Effective(b, pv.Pool, usd)
		if eff < best.Effective {
			best = present.SpotAlt{Pool: pv, Effective: eff, Total: eff * gpus * o.HeldHours()}
		}
	}
	return best, best.Pool != nil
}

func (v *blocksView) View() string {
	st := &v.c.styles
	if v.svc == nil {
		return st.dim.Render("Capacity blocks cannot be booked in this session (no ledger).")
	}
	if v.editing {
		return v.openForm.view(st, 15, v.w, v.formHints()[v.edit.Focus()], "tab/↑/↓ field · enter search · esc back to the last search") +
			"\n\n" + st.dim.Render(wordwrap(blocksFormHelp, v.w))
	}
	var b strings.Builder
	t := v.shownTerms()
	tunit := "GPUs"
	if t.instances {
		tunit = "instances"
	}
	length := t.duration
	if f := strings.TrimSpace(t.flex); f != "" {
		length += " (or within " + f + ")"
	}
	summary := fmt.Sprintf("%s × %s %s for %s, starting %s … %s", t.size, t.gpu, tunit, length,
		cmp.Or(t.after, "now"), cmp.Or(t.before, "as far as sold"))
	switch {
	case v.formErr != "":
		summary += " · " + v.formErr
	case v.searching:
		summary += " · searching…"
	case !v.at.IsZero():
		summary += fmt.Sprintf(" · %d offerings at %s", len(v.offers), v.at.In(v.c.now().Location()).Format("15:04"))
	}
	// Wrapped, not cut: "(e edits)" stays whole.
	lines := strings.Split(wordwrap(summary, v.w), "\n")
	if last := len(lines) - 1; cellWidth(lines[last])+len("   (e edits)") <= v.w {
		lines[last] += "   (e edits)"
	} else {
		lines = append(lines, "(e edits)")
	}
	if v.prompt.open {
		b.WriteString(v.prompt.view(st, v.w) + "\n")
	}
	b.WriteString(st.dim.Render(strings.Join(lines, "\n")))
	cols := fitTable(blocksColumnsFor(v.offers), v.w-2)
	b.WriteString("\n" + st.dim.Render(wordwrap(v.footnote(cols), v.w)))
	// A wrapped line per source that did not answer, in the service's order.
	for _, w := range v.warnings {
		b.WriteString("\n" + st.footerErr.Render(wordwrap(w.String(), v.w)))
	}
	b.WriteString("\n  " + st.header.Render(tableHeader(cols)))
	switch {
	case len(v.offers) == 0 && !v.searching && v.searched:
		hint := "No offerings for these terms. e: try other dates, a shorter duration or fewer GPUs."
		if len(v.warnings) > 0 {
			hint = "No offerings where the search was answered; above, what did not answer or refused it. e edits the terms."
		}
		b.WriteString("\n  " + st.dim.Render(fit(hint, max(v.w-2, 1), false)))
	case !v.searched && !v.searching:
		b.WriteString("\n" + st.dim.Render(wrapIndent("  r searches with these terms (e edits them): a search asks every region of every cloud, so a read-only session searches when asked.", v.w)))
	}
	loc := v.c.now().Location()
	rows := max(v.h-strings.Count(b.String(), "\n")-1, 1)
	first, end := page(v.cur, len(v.offers), rows)
	for i := first; i < end; i++ {
		r := present.OfferingRow{Offering: v.offers[i], Loc: loc}
		r.Alt, _ = v.spotAlternativeOnce(r.Offering)
		b.WriteString(st.pointed("\n", tableLine(cols, &r), i == v.cur))
	}
	return b.String()
}

// footnote says what the table's marked columns mean.
func (v *blocksView) footnote(cols []shownCol[*present.OfferingRow]) string {
	s := "* SPOT ALT: the cheapest spot pool's EFF $/GPU-h for the block's GPUs and hours (interruptions priced in)"
	if isShown(cols, present.OfferAltTotal) {
		s += ", ALT TOTAL for them"
	}
	flex := false
	for _, o := range v.offers {
		flex = flex || o.FlexLength
	}
	// $/H is shown only where something bills by the hour (blocksColumnsFor).
	if isShown(cols, present.OfferHourly) {
		s += ". $/H: what a reservation bills an hour until deleted; its UPFRONT $ is that for the hours asked"
	}
	if flex {
		s += ". ~: a length other than the duration asked, within the form's other lengths"
	}
	return s
}

// makeBlockRule: a block rule on the Blocks search, under its cheapest block.
func (v *blocksView) makeBlockRule() (*rulePrompt, tea.Cmd) {
	f := v.shownTerms()
	now := v.c.now()
	q, err := f.parse(now)
	if err != nil {
		return nil, notifyErrHere(fmt.Errorf("the search's terms: %w; e edits them", err))
	}
	b := &watch.BlockRule{GPU: q.GPU, GPUs: q.GPUs, Instances: q.Instances, Hours: q.Duration.Hours()}
	// "+2d" means from now: the rule keeps the time it names, in UTC.
	if !q.StartAfter.IsZero() {
		b.StartAfter = q.StartAfter.UTC().Format(time.RFC3339)
	}
	if !q.StartBefore.IsZero() {
		b.StartBefore = q.StartBefore.UTC().Format(time.RFC3339)
	}
	n, size := q.GPUs, fmt.Sprintf("%d %s", q.GPUs, q.GPU)
	if q.Instances > 0 {
		n, size = q.Instances, fmt.Sprintf("%d instances of %s", q.Instances, q.GPU)
	}
	p := rulePrompt{unit: "/GPU-h", what: fmt.Sprintf("a block of %s × %s", size, f.duration)}
	if len(v.offers) > 0 {
		if c := v.offers[0].USDPerGPUHour(); !math.IsNaN(c) {
			p.now = "cheapest now $" + present.Money(c)
			p.value = decimal(math.Round(c*95) / 100)
		}
	}
	p.build = func(_ bool, most float64) watch.Spec {
		bb := *b
		bb.MaxUSDGPUHour = &most
		return watch.Spec{Name: ruleName("block", q.GPU, strconv.Itoa(n), domain.FormatWindow(q.Duration)), Cond: &bb}
	}
	return &p, nil
}

// Fresh terms: the service refuses terms other than those shown; the box then
// shows the new ones and asks again (docs/DESIGN.md, The TUI).

// maxQuoteRenewals: a provider whose terms change at every look is said to.
const maxQuoteRenewals = 3

// renewBuy shows the purchase of o on the changed terms tc; they are compared
// with what the user last could say yes to (changed replaced, if o is renewed).
func renewBuy(svc *ledger.Service, actor string, o domain.Offering, now time.Time, changed, tc *ledger.TermsChangedError, quoted int) quoteAnswer {
	if quoted >= maxQuoteRenewals {
		return quoteAnswer{err: fmt.Errorf("the terms changed %d times while being checked: nothing was bought; search again in a while: %w", quoted+1, tc)}
	}
	seen := o
	if changed != nil {
		seen = changed.Shown
	}
	return quoteAnswer{renewed: buyAction(svc, actor, tc.Now, now, &ledger.TermsChangedError{Shown: seen, Now: tc.Now, Why: tc.Why}, quoted+1)}
}

// termsChange says what changed, the total first.
func termsChange(tc *ledger.TermsChangedError) string {
	was, now := tc.Shown, tc.Now
	if ledger.SameTerms(was, now) {
		// Changed and changed back while being checked: what was shown stands.
		return "Checked again with the provider: the terms are those shown before. Nothing was bought yet."
	}
	var diffs []string
	if d := now.UpfrontUSD - was.UpfrontUSD; math.Round(d*100) != 0 {
		diffs = append(diffs, fmt.Sprintf("total $%.2f → $%.2f (%s)", was.UpfrontUSD, now.UpfrontUSD, signedUSD(d)))
	}
	if now.StartsOnPurchase && was.StartsOnPurchase {
		rate := func(o domain.Offering) float64 { return o.UpfrontUSD / o.DurationHours() }
		if r0, r1 := rate(was), rate(now); math.Round(r0*100) != math.Round(r1*100) {
			diffs = append(diffs, fmt.Sprintf("$%.2f → $%.2f an hour", r0, r1))
		}
	} else if !now.Start.Equal(was.Start) {
		diffs = append(diffs, "start "+stamp(was.Start)+" → "+stamp(now.Start))
	}
	if !now.End.Equal(was.End) {
		diffs = append(diffs, "end "+stamp(was.End)+" → "+stamp(now.End))
	}
	if now.InstanceCount != was.InstanceCount || now.InstanceType != was.InstanceType {
		diffs = append(diffs, fmt.Sprintf("%d × %s → %d × %s", was.InstanceCount, present.DisplayType(was.InstanceType), now.InstanceCount, present.DisplayType(now.InstanceType)))
	}
	if now.Region != was.Region || now.Zone != was.Zone {
		diffs = append(diffs, present.Place(was.Region, was.Zone)+" → "+present.Place(now.Region, now.Zone))
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "its terms as the provider describes them now")
	}
	return fmt.Sprintf("Changed since shown (%s): %s. Nothing was bought; the new terms follow.", tc.Why, strings.Join(diffs, "; "))
}

// termsTitle is a renewed purchase's question, the new total first.
func termsTitle(o domain.Offering, tc *ledger.TermsChangedError) string {
	if ledger.SameTerms(tc.Shown, o) {
		return fmt.Sprintf("Checked again: buy this %s for $%.2f?", o.Terms().Name, o.UpfrontUSD)
	}
	return fmt.Sprintf("The terms changed: buy this %s for $%.2f now (shown $%.2f)?", o.Terms().Name, o.UpfrontUSD, tc.Shown.UpfrontUSD)
}

// stamp is a time of a change line, in UTC: both sides in one zone.
func stamp(t time.Time) string { return t.UTC().Format("01-02 15:04 UTC") }

func signedUSD(d float64) string {
	if d < 0 {
		return fmt.Sprintf("-$%.2f", -d)
	}
	return fmt.Sprintf("+$%.2f", d)
}
