package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/tui/widget/form"
)

// fleetPoll is how often a launched fleet's state is asked for.
const fleetPoll = 15 * time.Second

type (
	// fleetLaunchedMsg follows a launch; a fleet with a ledger row is followed.
	fleetLaunchedMsg struct {
		res ledger.FleetResult
		err error
	}
	fleetStateMsg struct {
		rowID string
		fleet domain.Fleet
		row   ledger.Entry
		err   error
	}
	fleetTickMsg struct{ seq int }
)

type fleetKeys struct {
	Launch, Form key.Binding
	keyMap
}

type fleetForm struct {
	target, onDemand string
	strategy         int
	maxPrice         string
	// start and length schedule it as `fleet launch --start --for`; empty: now, until deleted.
	start, length string
	template      string
}

func (f *fleetForm) fields() []form.Field {
	return []form.Field{form.Text("Target", &f.target), form.Text("On-demand base", &f.onDemand),
		form.Choice("Strategy", domain.Strategies, &f.strategy), form.Text("Max price $/h", &f.maxPrice).Empty("on-demand price"),
		form.Text("Start", &f.start).Empty("now"), form.Text("For", &f.length).Empty("until deleted"),
		form.Text("Launch template", &f.template).Empty("provider default (config aws.launch_template)")}
}

// fleetView composes a spot fleet from the Market's marks, launches it, follows it.
type fleetView struct {
	actingView // no rule prompt: a fleet is not watched
	svc        *ledger.Service
	keys       fleetKeys

	form fleetForm

	// poolKeys are the Market's picks; cursorOnly: none marked, so the cursor's.
	poolKeys   []string
	cursorOnly bool

	rowID    string
	row      ledger.Entry
	fleet    domain.Fleet
	followed bool
	polling  bool
	lastPoll time.Time
	tick     int
	pollErr  string
}

func newFleetView(c *common, ctx context.Context, svc *ledger.Service) *fleetView {
	k := fleetKeys{
		Launch: key.NewBinding(key.WithKeys("L"), key.WithHelp("L", "launch")),
		Form:   key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "edit fleet")),
	}
	k.keyMap = keyMap{[]key.Binding{k.Launch, k.Form}, [][]key.Binding{{k.Launch, k.Form}, c.keys.row(true)}}
	v := &fleetView{actingView: actingView{base: base{c: c, ctx: ctx}}, svc: svc, keys: k, form: fleetForm{target: "2", onDemand: "0"}}
	v.edit = form.New(v.form.fields()...)
	v.confirm = v.confirmation(svc != nil)
	return v
}

// takePools takes the picks again; a pools error is re-said or goes.
func (v *fleetView) takePools() {
	keys, marked := v.c.market.picked()
	changed := !slices.Equal(keys, v.poolKeys)
	v.poolKeys, v.cursorOnly = keys, !marked
	if changed && v.formErr != "" {
		v.compose() // its error shows beside the form
	}
}

// refreshPools leaves the pools alone while the confirmation or form is open.
func (v *fleetView) refreshPools() {
	if !v.confirm.open && !v.editing {
		v.takePools()
	}
}

// shown takes the marks as they are now, not as of the last market tick.
func (v *fleetView) shown() tea.Cmd {
	v.refreshPools()
	return nil
}

func (v *fleetView) Title() string       { return "Fleet" }
func (v *fleetView) KeyMap() help.KeyMap { return v.keyMap(v.keys, "strategy", "done", "put back") }
func (v *fleetView) slashFiltersMarket() {}

func (v *fleetView) helpNote() string {
	return "Mark pools in the Market view (space): their instance types, in one region, become the fleet. A fleet bills until deleted " +
		"(Ledger view, d); the ledger records the estimate of its first hour. Start (Thu 14:00, +2h, …) and For (3h) schedule it: " +
		"the confirmation says who starts and stops it (the cloud, or a running gpumarket)."
}

// compose makes the fleet of the picks and the form; its error stays beside the form.
func (v *fleetView) compose() (spec domain.FleetSpec, err error) {
	defer func() {
		v.formErr = ""
		if err != nil {
			v.formErr = err.Error()
		}
	}()
	if len(v.poolKeys) == 0 {
		return spec, fmt.Errorf("no pools: mark spot pools in the Market view (space), all in one region")
	}
	provs, regions := map[string]bool{}, map[string]bool{}
	spec.InstanceTypes, spec.Zones = []string{}, []string{}
	for _, k := range v.poolKeys {
		parts := strings.SplitN(k, "/", 4)
		if len(parts) != 4 {
			continue
		}
		provs[parts[0]], regions[parts[1]] = true, true
		spec.Provider, spec.Region = parts[0], parts[1]
		if parts[2] != "" && !slices.Contains(spec.Zones, parts[2]) {
			spec.Zones = append(spec.Zones, parts[2])
		}
		if !slices.Contains(spec.InstanceTypes, parts[3]) {
			spec.InstanceTypes = append(spec.InstanceTypes, parts[3])
		}
	}
	if len(provs) != 1 || len(regions) != 1 {
		return spec, fmt.Errorf("the marked pools span %s and %s: a fleet is one provider's, in one region", plural(len(provs), "provider"), plural(len(regions), "region"))
	}
	// What does not parse is said here; what is out of bounds, by the fleet's terms.
	if spec.TargetCapacity, err = strconv.Atoi(strings.TrimSpace(v.form.target)); err != nil {
		return spec, fmt.Errorf("target %q: want a whole number of instances", v.form.target)
	}
	if spec.OnDemandBase, err = strconv.Atoi(strings.TrimSpace(v.form.onDemand)); err != nil {
		return spec, fmt.Errorf("on-demand base %q: want 0 to the target", v.form.onDemand)
	}
	spec.Strategy = domain.Strategies[v.form.strategy%len(domain.Strategies)]
	if s := strings.TrimSpace(v.form.maxPrice); s != "" {
		p, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return spec, fmt.Errorf("max price %q: want a positive $ per instance-hour, or empty for the on-demand price", s)
		}
		spec.MaxPriceUSD = &p
	}
	if err := spec.CheckTerms(); err != nil {
		return spec, err
	}
	spec.LaunchTemplate = strings.TrimSpace(v.form.template)
	if spec.Start, spec.End, err = domain.ParseFleetSchedule(v.form.start, v.form.length, v.c.now()); err != nil {
		return spec, err
	}
	return spec, ledger.CheckFleet(spec)
}

func (v *fleetView) Update(msg tea.Msg) (view, tea.Cmd) {
	msg, cmd := v.confirm.update(msg)
	cmds := []tea.Cmd{cmd}
	switch msg := msg.(type) {
	case fleetLaunchedMsg:
		cmds = append(cmds, v.follow(msg))
	case fleetStateMsg:
		cmds = append(cmds, v.polled(msg))
	case snapshotMsg:
		if !v.confirm.open {
			v.takePools()
		}
	case fleetTickMsg:
		if msg.seq == v.tick && v.followed {
			cmds = append(cmds, v.poll())
		}
	case tea.PasteMsg:
		v.paste(msg)
	case tea.KeyPressMsg:
		v.refreshPools()
		cmds = append(cmds, v.updateKey(msg))
	}
	return v, tea.Batch(cmds...)
}

func (v *fleetView) poll() tea.Cmd {
	if v.polling || v.svc == nil || v.rowID == "" {
		return nil
	}
	v.polling, v.lastPoll = true, v.c.now()
	svc, ctx, id := v.svc, v.ctx, v.rowID
	return v.task(func() tea.Msg {
		f, r, err := svc.RefreshFleet(ctx, id)
		return fleetStateMsg{rowID: id, fleet: f, row: r, err: err}
	})
}

func (v *fleetView) follow(msg fleetLaunchedMsg) tea.Cmd {
	if msg.res.Row.ID != "" {
		v.rowID, v.row, v.followed = msg.res.Row.ID, msg.res.Row, true
		v.fleet = msg.res.Fleet
		v.lastPoll = v.c.now()
	}
	if msg.err != nil {
		return nil
	}
	v.tick++
	return v.after(v.c, fleetPoll, fleetTickMsg{seq: v.tick})
}

func (v *fleetView) polled(msg fleetStateMsg) tea.Cmd {
	if msg.rowID != v.rowID {
		return nil
	}
	v.polling = false
	if msg.err != nil {
		v.pollErr = msg.err.Error()
	} else {
		v.pollErr, v.fleet, v.row = "", msg.fleet, msg.row
	}
	if v.row.State == ledger.StateDeleted || v.row.State == ledger.StateFailed || v.row.State == ledger.StateEnded {
		v.followed = false
		return nil
	}
	v.tick++
	return v.after(v.c, fleetPoll, fleetTickMsg{seq: v.tick})
}

func (v *fleetView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	if v.editing {
		return v.editKey(msg)
	}
	switch {
	case key.Matches(msg, v.keys.Form):
		v.open(v.form.fields())
	case key.Matches(msg, v.keys.Launch):
		return v.confirm.offer(v.launchFleet)
	}
	return nil
}

func (v *fleetView) launchFleet() (*moneyAction, tea.Cmd) {
	spec, err := v.compose()
	if err != nil {
		return nil, notifyErrHere(err)
	}
	now := v.c.now()
	a := launchAction(v.svc, v.c.actor, spec, now, "from", nil)
	a.lines = append(a.lines, v.svc.ScheduleLines(spec, now)...)
	return a, nil
}

// launchAction is Fleet's L and Plan's b: estimate, dry run, launch (a later
// start is a schedule "from" or "for" it); ec: the estimate rose since shown.
func launchAction(svc *ledger.Service, actor string, spec domain.FleetSpec, now time.Time, from string, ec *ledger.EstimateChangedError) *moneyAction {
	sim := simLaunch(svc, spec.Provider)
	a := &moneyAction{
		title: fmt.Sprintf("Launch %s in %s?%s", fleetKind(spec), spec.Region, sim), verb: "launch",
		checking: "estimating the cost and asking the provider for a dry run", sending: "launching",
	}
	if spec.Start.After(now) {
		a.title = fmt.Sprintf("Schedule %s in %s %s %s?%s", fleetKind(spec), spec.Region, from, spec.Start.In(now.Location()).Format("Mon 01-02 15:04"), sim)
		a.verb, a.sending = "schedule", "scheduling"
	}
	if ec != nil {
		a.title = fmt.Sprintf("The prices went up: %s %s in %s at about $%.2f an hour now (shown $%.2f)?%s",
			a.verb, fleetKind(spec), spec.Region, ec.Now.USDHour, ec.Shown.USDHour, sim)
		a.lines = append([]string{fmt.Sprintf("Changed since shown: about $%.2f → $%.2f an hour (%s). Nothing was launched; the new estimate follows.",
			ec.Shown.USDHour, ec.Now.USDHour, signedUSD(ec.Now.USDHour-ec.Shown.USDHour))}, fleetLines(spec, ec.Now, now)...)
		a.checking = "asking the provider for a dry run"
	}
	a.quote = func(ctx context.Context) quoteAnswer {
		var ans quoteAnswer
		est := ledger.FleetEstimate{}
		if ec != nil {
			est = ec.Now
		} else {
			est = svc.EstimateFleet(ctx, spec)
			ans.lines = fleetLines(spec, est, svc.Now())
		}
		if ans.dryRun, ans.err = dryLaunch(ctx, svc, spec, est); ans.err == nil {
			ans.send = launchSend(svc, actor, spec, est)
		}
		return ans
	}
	return a
}

// simLaunch marks the title of a launch on the simulated market.
func simLaunch(svc *ledger.Service, provider string) string {
	if provider != "" && svc.Describe(provider).Simulated {
		return " (SIMULATED MARKET: nothing real is launched)"
	}
	return ""
}

// dryLaunch is the provider's dry-run answer to launching spec at est.
func dryLaunch(ctx context.Context, svc *ledger.Service, spec domain.FleetSpec, est ledger.FleetEstimate) (string, error) {
	dry := spec
	dry.DryRun = true
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: dry, Estimate: est})
	if err != nil {
		return "", err
	}
	return cmp.Or(dryRunAnswer(res.Fleet.Message), "the provider says the launch would succeed"), nil
}

// fleetKind names a fleet by its make-up: "a spot fleet of 5 instances".
func fleetKind(spec domain.FleetSpec) string {
	n := spec.TargetCapacity
	od := min(max(spec.OnDemandBase, 0), n)
	switch {
	case od == 0:
		return fmt.Sprintf("a spot fleet of %s", plural(n, "instance"))
	case od == n:
		return fmt.Sprintf("an on-demand fleet of %s", plural(n, "instance"))
	}
	return fmt.Sprintf("a fleet of %s (%d on-demand, %d spot)", plural(n, "instance"), od, n-od)
}

func fleetLines(spec domain.FleetSpec, est ledger.FleetEstimate, now time.Time) []string {
	var out []string
	bills := est.Billing(spec, now)
	if math.IsNaN(est.USDHour) {
		out = append(out, "Estimated cost: unknown ("+est.Basis+"); "+bills)
	} else {
		line := fmt.Sprintf("Estimated cost: $%.2f per hour (%s); %s", est.USDHour, est.Basis, bills)
		if est.PricedGPUs > 0 {
			line += fmt.Sprintf(" · $%.4f per GPU-hour", est.USDHour/est.PricedGPUs)
		}
		out = append(out, line)
	}
	out = append(out,
		fmt.Sprintf("%d instances: %d on-demand, %d spot · strategy %s", spec.TargetCapacity, spec.OnDemandBase, spec.TargetCapacity-spec.OnDemandBase, spec.Strategy),
		fmt.Sprintf("types %s · %s · %s", strings.Join(spec.InstanceTypes, ", "), strings.TrimSpace(spec.Region+" "+strings.Join(spec.Zones, ",")), spec.Provider))
	if spec.MaxPriceUSD != nil {
		out = append(out, fmt.Sprintf("max spot price $%.4f per instance-hour", *spec.MaxPriceUSD))
	}
	if spec.LaunchTemplate != "" {
		out = append(out, "launch template "+spec.LaunchTemplate)
	}
	return out
}

func (v *fleetView) editKey(msg tea.KeyPressMsg) tea.Cmd {
	if v.edit.Update(msg) == form.Editing {
		return nil
	}
	v.editing = false
	v.compose() // its error shows beside the form
	return nil
}

func (v *fleetView) View() string {
	st := &v.c.styles
	if v.svc == nil {
		return st.dim.Render("Fleets cannot be launched in this session (no ledger).")
	}
	var b strings.Builder
	if len(v.poolKeys) > 0 && v.cursorOnly {
		b.WriteString(st.title.Render("Pool (under the Market cursor: none marked; mark several with space)") + "\n")
	} else {
		b.WriteString(st.title.Render("Pools (marked in Market)") + "\n")
	}
	if len(v.poolKeys) == 0 {
		b.WriteString("  " + st.dim.Render("none: mark spot pools of one region in the Market view with space") + "\n")
	}
	for _, k := range slices.Sorted(slices.Values(v.poolKeys)) {
		b.WriteString("  " + k + "\n")
	}
	b.WriteString("\n" + st.title.Render("Fleet") + "\n")
	for i := range v.edit.Len() {
		line := fmt.Sprintf("  %-16s %s", v.edit.Label(i), v.edit.Value(i))
		if v.editing {
			line = "  " + formLine(&v.edit, i, 16, v.w-2)
		}
		if v.editing && i == v.edit.Focus() {
			line = st.cursor.Render(line)
		}
		b.WriteString(line + "\n")
	}
	if v.editing {
		hint := "  tab/↑/↓ field · ←/→ strategy · enter done · esc puts back"
		switch v.edit.Label(v.edit.Focus()) {
		case "Start":
			hint = "  Thu 14:00, +2h, " + domain.WhenExample(v.c.now()) + " … (local time) · empty: now"
		case "For":
			hint = "  3h, 90m, 2d … (5m to 90d) · empty: until deleted"
		}
		b.WriteString(st.dim.Render(hint) + "\n")
	} else {
		b.WriteString(st.dim.Render("  e edits · L launches (after a confirmation that shows the cost)") + "\n")
	}
	if v.formErr != "" {
		b.WriteString("  " + st.footerErr.Render(wrapIndent(v.formErr, v.w)) + "\n")
	}
	if v.rowID != "" {
		title := "Launched"
		if v.row.State == ledger.StateScheduled {
			title = "Scheduled"
		}
		b.WriteString("\n" + st.title.Render(title) + "\n")
		// Wrapped at field breaks: at 80 columns each part is read whole.
		parts := []string{cmp.Or(v.row.ProviderRef, "-"), "state " + v.row.State,
			fmt.Sprintf("instances %d/%d", v.fleet.Instances, max(v.fleet.Target, v.row.InstanceCount))}
		if left := present.TimeLeft(v.row, v.c.now()); left != "-" {
			parts = append(parts, left)
		}
		if v.fleet.EstimatedUSDh > 0 {
			parts = append(parts, fmt.Sprintf("$%.2f/h now", v.fleet.EstimatedUSDh))
		}
		parts = append(parts, "ledger row "+v.rowID)
		if !v.lastPoll.IsZero() {
			parts = append(parts, fmt.Sprintf("(checked %s)", v.lastPoll.In(v.c.now().Location()).Format("15:04:05")))
		}
		b.WriteString("  " + wrapIndent(strings.Join(parts, "  "), v.w))
		if v.pollErr != "" {
			b.WriteString("\n  " + st.footerErr.Render(wrapIndent(v.pollErr, v.w)))
		}
		if v.row.Error != "" {
			b.WriteString("\n  " + st.footerErr.Render(wrapIndent(v.row.Error, v.w)))
		}
		if sched, ok := ledger.ScheduleOf(v.row); ok {
			b.WriteString("\n  " + st.dim.Render(wrapIndent(ledger.WindowText(sched.Start, sched.End, v.c.now())+" · "+
				sched.Keeper.Note(v.svc.Describe(v.row.Provider)), v.w)))
		}
	}
	return b.String()
}

// wrapIndent wraps an error under a two-space indent: its end says what to do.
func wrapIndent(s string, w int) string {
	return strings.ReplaceAll(wordwrap(s, max(w-2, 1)), "\n", "\n  ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// launchSend launches spec at the estimate est shown; with a budget cap,
// risen prices launch nothing and ask again.
func launchSend(svc *ledger.Service, actor string, spec domain.FleetSpec, est ledger.FleetEstimate) func(context.Context) outcome {
	return func(ctx context.Context) outcome {
		res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: est, Actor: actor})
		if ec, ok := errors.AsType[*ledger.EstimateChangedError](err); ok {
			return outcome{renewed: launchAction(svc, actor, spec, svc.Now(), "", ec)}
		}
		notice := fmt.Sprintf("launched %s (ledger row %s)", res.Row.ProviderRef, short(res.Row.ID))
		if s := res.Short(); s != "" {
			notice += ": " + s
		}
		shown := err
		switch {
		case err == nil && res.Row.State == ledger.StateFailed:
			// Taken but nothing launched (no spot capacity): a failure, nothing bills.
			shown = fmt.Errorf("not launched: %s (ledger row %s)", res.Row.Error, short(res.Row.ID))
		case res.Row.State == ledger.StateScheduled && res.Row.ProviderRef == "":
			notice = fmt.Sprintf("scheduled: gpumarket launches it at its start (ledger row %s)", short(res.Row.ID))
		case res.Row.State == ledger.StateScheduled:
			notice = fmt.Sprintf("scheduled at the cloud: %s (ledger row %s)", res.Row.ProviderRef, short(res.Row.ID))
		}
		return outcome{err: shown, then: fleetLaunchedMsg{res: res, err: err}, notice: notice}
	}
}
