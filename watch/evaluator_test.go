package watch

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

// The decision of a condition rule: once per crossing, at most once per
// cooldown, a crossing in the cooldown told when it ends if it still
// holds.
func TestCrossing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	hour := time.Hour
	steps := []struct {
		at   time.Duration
		cond bool
		fire bool
	}{
		{0, false, false},
		{1 * hour, true, true},                   // crossing
		{2 * hour, true, false},                  // still below: no repeat
		{3 * hour, false, false},                 // back above
		{3*hour + 30*time.Minute, true, false},   // crossing in the cooldown: owed
		{3*hour + 50*time.Minute, true, false},   // still in the cooldown
		{4 * hour, true, true},                   // cooldown over, still below: told
		{5 * hour, true, false},                  // no repeat
		{6 * hour, false, false},                 //
		{7*hour + 10*time.Minute, true, true},    // a new crossing, cooldown over
		{7*hour + 20*time.Minute, false, false},  //
		{7*hour + 30*time.Minute, true, false},   // owed…
		{7*hour + 40*time.Minute, false, false},  // …but it went away: forgotten
		{10*hour + 20*time.Minute, false, false}, // the cooldown ends with nothing owed
		{10*hour + 30*time.Minute, true, true},   // a new crossing
	}
	var st ruleState
	for i, s := range steps {
		a := crossing(s.cond, t0.Add(s.at), 3*hour, func() *Alert { return &Alert{} })(&st)
		if (a != nil) != s.fire {
			t.Fatalf("step %d (%s, cond %v): fired %v, want %v; state %+v", i, s.at, s.cond, a != nil, s.fire, st)
		}
	}
}

// Fifty sessions watch one evaluator: one alert, told to all of them.
func TestOneAlertForManySubscribers(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e := newEvaluator(t, Options{Now: newClock(now).Now, Rules: validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	ctx := ctxT(t)
	subs := make([]<-chan struct{}, 50)
	for i := range subs {
		subs[i] = e.Subscribe(ctx)
	}
	snap := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 25, p5("us-west-2b"): 10})
	for range 3 { // the same market, evaluated again and again
		e.evalSnapshot(ctx, snap)
	}
	for i, ch := range subs {
		select {
		case <-ch:
		default:
			t.Fatalf("subscriber %d was not woken", i)
		}
	}
	as := e.Alerts(0)
	if len(as) != 1 || as[0].Rule != "cheap" || *as[0].Zone != "us-west-2b" || *as[0].USDHour != 10 || !as[0].Tells(TellTUI) {
		t.Fatalf("alerts %+v, want one for the cheapest zone", as)
	}
	if e.Subscribers() != 50 {
		t.Errorf("%d subscribers", e.Subscribers())
	}
}

// A restart neither repeats an alert nor loses one not yet delivered.
func TestRestartKeepsFiringsAndDeliveries(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h := newHook(t, 200)
	notify := config.Notify{Webhook: &config.Webhook{URL: h.srv.URL}}
	rules := validRules(t, notify, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, time.Hour))
	snap := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10})

	// The first process raises the alert and dies before delivering it.
	st1, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := New(Options{State: st1, Now: newClock(now).Now, Notify: notify, Notifiers: []Notifier{fastWebhook(h.srv.URL, 3, time.Second)}, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	e1.evalSnapshot(context.Background(), snap)
	if e1.fired.Load() != 1 || h.calls() != 0 {
		t.Fatalf("fired %d, %d POSTs", e1.fired.Load(), h.calls())
	}
	st1.Close()

	// The next one, over the same market, says nothing new and delivers
	// what was owed.
	st2 := openState(t, dir)
	e2, err := New(Options{State: st2, Now: newClock(now.Add(2 * time.Hour)).Now, Notify: notify, Notifiers: []Notifier{fastWebhook(h.srv.URL, 3, time.Second)}, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	if got := e2.Alerts(0); len(got) != 1 {
		t.Fatalf("the restarted evaluator knows %d alerts, want the 1 raised before", len(got))
	}
	fired, err := e2.Once(context.Background(), snapshotOf(now.Add(2*time.Hour), map[domain.Pool]float64{p5("us-west-2a"): 10}))
	if err != nil {
		t.Fatal(err)
	}
	if fired != 0 {
		t.Errorf("the restart raised %d alerts for a crossing already told", fired)
	}
	if h.calls() != 1 {
		t.Errorf("the owed alert was POSTed %d times, want 1", h.calls())
	}
	if d := deliveries(t, e2); d[0].State != DeliveryDone {
		t.Errorf("delivery %+v", d)
	}
}

// Two processes on one state (a `serve` and a `watch`) raise an alert
// once between them.
func TestTwoProcessesRaiseOnce(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rules := validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))
	snap := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10})
	var es []*Evaluator
	for range 2 {
		es = append(es, newEvaluator(t, Options{State: openState(t, dir), Now: newClock(now).Now, Rules: rules}))
	}
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() { defer wg.Done(); e.evalSnapshot(context.Background(), snap) }()
	}
	wg.Wait()
	if total := es[0].fired.Load() + es[1].fired.Load(); total != 1 {
		t.Fatalf("the two processes raised %d alerts, want 1", total)
	}
	// The other process's sessions see it at its next tick.
	for _, e := range es {
		e.pullAlerts(context.Background())
		if len(e.Alerts(0)) != 1 {
			t.Errorf("a process knows %d alerts, want 1", len(e.Alerts(0)))
		}
	}
}

// A delivery claimed by a process that died is taken over when its lease
// runs out, and only then.
func TestDeliveryLeaseTakenOverAfterACrash(t *testing.T) {
	st := openState(t, t.TempDir())
	ctx := context.Background()
	now := time.Now()
	a, _, err := st.decide(ctx, "r", "f", now, []string{TellWebhook}, func(s *ruleState) *Alert {
		return &Alert{Rule: "r", Tell: []string{TellWebhook}}
	})
	if err != nil || a == nil {
		t.Fatal(err)
	}
	now = time.Now() // the delivery is due from when it was recorded
	got, err := st.claim(ctx, []string{TellWebhook}, "dead", now, time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].alert.ID != a.ID {
		t.Fatalf("claim: %v %v", got, err)
	}
	if again, _ := st.claim(ctx, []string{TellWebhook}, "alive", now.Add(30*time.Second), time.Minute, 10); len(again) != 0 {
		t.Fatalf("a live lease was taken over: %v", again)
	}
	again, _ := st.claim(ctx, []string{TellWebhook}, "alive", now.Add(2*time.Minute), time.Minute, 10)
	if len(again) != 1 || again[0].attempts != 2 {
		t.Fatalf("after the lease: %+v, want the delivery, attempt 2", again)
	}
	// The dead owner's late answer does not settle what is not its own.
	st.finish(ctx, got[0], "dead", DeliveryDone, "", time.Time{})
	if n, _, _ := st.owed(ctx, []string{TellWebhook}); n != 1 {
		t.Errorf("owed %d, want the taken-over delivery still owed", n)
	}
}

// SIGTERM: Run returns after the delivery in flight has finished, not
// before.
func TestRunFinishesDeliveriesInFlight(t *testing.T) {
	h := newHook(t, 200)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var finished time.Time
	var mu sync.Mutex
	h.delay = func(int) time.Duration {
		started <- struct{}{}
		<-release
		mu.Lock()
		finished = time.Now()
		mu.Unlock()
		return 0
	}
	notify := config.Notify{Webhook: &config.Webhook{URL: h.srv.URL}}
	e := newEvaluator(t, Options{Now: newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)).Now, Tick: 5 * time.Millisecond,
		Notify: notify, Notifiers: []Notifier{fastWebhook(h.srv.URL, 3, 10*time.Second)},
		Rules: validRules(t, notify, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	raiseOne(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan time.Time)
	go func() { e.Run(ctx); done <- time.Now() }()
	<-started
	cancel() // SIGTERM, with the POST in flight
	select {
	case <-done:
		t.Fatal("Run returned with a delivery in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	returned := <-done
	mu.Lock()
	defer mu.Unlock()
	if returned.Before(finished) {
		t.Error("Run returned before the delivery finished")
	}
	if d := deliveries(t, e); d[0].State != DeliveryDone {
		t.Errorf("delivery %+v, want delivered", d)
	}
}

func TestCheckAsksTheDescriptors(t *testing.T) {
	aws := domain.Descriptor{Name: "aws", IsRegion: func(r string) bool { return strings.Count(r, "-") == 2 }, RegionExample: "us-east-1",
		Sells: []*domain.BookingTerms{domain.CapacityBlockTerms}}
	azure := domain.Descriptor{Name: "azure", IsRegion: func(r string) bool { return !strings.Contains(r, "-") }, RegionExample: "eastus",
		Sells: []*domain.BookingTerms{domain.ReservationTerms}}
	spot := func(region, provider string) Spec {
		return Spec{Name: "s", Cond: &SpotRule{InstanceType: "p5.48xlarge", Region: region, Provider: provider, BelowUSDHour: f64(1)}}
	}
	block := func(hours float64, regions ...string) Spec {
		return Spec{Name: "b", Cond: &BlockRule{GPU: "H100", GPUs: 8, Hours: hours, Regions: regions}}
	}
	cases := []struct {
		name  string
		rule  Spec
		descs []domain.Descriptor
		key   string // "" for accepted
		says  string
	}{
		{"aws region", spot("us-west-2", ""), []domain.Descriptor{aws}, "", ""},
		{"region nobody knows", spot("westmars", ""), []domain.Descriptor{aws}, "spot.region", "us-east-1"},
		{"region of the other cloud", spot("eastus", ""), []domain.Descriptor{aws, azure}, "", ""},
		{"region of a provider not named", spot("eastus", "aws"), []domain.Descriptor{aws, azure}, "spot.region", "none of the providers"},
		{"provider not in use", spot("us-west-2", "azure"), []domain.Descriptor{aws}, "spot.provider", "not in use"},
		{"block days", block(48), []domain.Descriptor{aws}, "", ""},
		{"block hours AWS does not sell", block(30), []domain.Descriptor{aws}, "block.hours", "1 to 14 days"},
		{"block hours Azure sells", block(30), []domain.Descriptor{aws, azure}, "", ""},
		{"nobody sells blocks", block(48), []domain.Descriptor{{Name: "x"}}, "block", "sells capacity blocks"},
		{"block region", block(48, "eastus"), []domain.Descriptor{aws}, "block.regions[0]", "us-east-1"},
		{"plan", Spec{Name: "p", Cond: &PlanRule{}}, []domain.Descriptor{aws}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.rule, c.descs)
			var ce *config.KeyError
			switch {
			case c.key == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.key != "" && (!errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(ce.Msg, c.says)):
				t.Errorf("Check = %v, want %s: …%s…", err, c.key, c.says)
			}
		})
	}
}

// A rule made in the TUI is saved in the rules file, survives a restart,
// and can be deleted there; the config's rules cannot.
func TestRulesMadeInTheTUI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RulesFileName)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cfgRules := validRules(t, config.Notify{}, spotRule("spot", "p5.48xlarge", "us-west-2", "", 20, 0))
	checked := 0
	check := func(w Spec) error {
		checked++
		if s, ok := w.Cond.(*SpotRule); ok && s.Region == "westmars" {
			return &config.KeyError{Key: "spot.region", Msg: "no such region"}
		}
		return nil
	}
	opt := Options{State: openState(t, dir), Now: newClock(now).Now, Rules: cfgRules, ConfigPath: "config.yaml", RulesFile: path, Check: check}
	e := newEvaluator(t, opt)
	ctx := context.Background()
	w := spotRule("", "P5.48XLARGE", "us-west-2", "us-west-2a", 18, time.Hour)
	w.MadeBy = "ssh:SHA256:abc alice"
	r, err := e.AddRule(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	// Named after its kind, made unique beside the config's "spot".
	if r.Name != "spot-2" || r.From != FromRulesFile || r.Cond.(*SpotRule).InstanceType != "p5.48xlarge" {
		t.Errorf("made %+v", r)
	}
	if _, err := e.AddRule(ctx, spotRule("far", "p5.48xlarge", "westmars", "", 18, 0)); err == nil || !strings.Contains(err.Error(), "no such region") {
		t.Errorf("a rule the providers refuse was saved: %v", err)
	}
	past := Spec{Name: "late", Cond: &BlockRule{GPU: "H100", GPUs: 8, Hours: 24, StartBefore: "2026-11-01"}}
	if _, err := e.AddRule(ctx, past); err == nil || !strings.Contains(err.Error(), "has passed") {
		t.Errorf("a block rule whose range has passed was saved: %v", err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "made_by: ssh:SHA256:abc alice") || !strings.HasPrefix(string(data), "# Watch rules made") {
		t.Errorf("rules file:\n%s", data)
	}
	if len(e.Rules()) != 2 {
		t.Errorf("rules in force: %d, want 2", len(e.Rules()))
	}

	// The next process has it, asking the providers about it again.
	before := checked
	opt.State = openState(t, dir)
	e2 := newEvaluator(t, opt)
	if checked != before+1 {
		t.Errorf("the rules file's rule was checked %d times at load, want 1", checked-before)
	}
	rs := e2.Rules()
	if len(rs) != 2 || rs[1].Name != "spot-2" || rs[1].Cond.(*SpotRule).Zone != "us-west-2a" || rs[1].Fingerprint != r.Fingerprint {
		t.Fatalf("after a restart: %+v", rs)
	}
	if err := e2.RemoveRule(ctx, "spot"); err == nil || !strings.Contains(err.Error(), "config.yaml") {
		t.Errorf("removing a config rule: %v", err)
	}
	if err := e2.RemoveRule(ctx, "spot-2"); err != nil {
		t.Fatal(err)
	}
	if len(e2.Rules()) != 1 {
		t.Errorf("rules after removal: %+v", e2.Rules())
	}
	// The first process sees the file change at its next tick.
	e.reloadRulesFile()
	if len(e.Rules()) != 1 {
		t.Errorf("the other process still has %d rules", len(e.Rules()))
	}
}

// A rules file that breaks a rule is refused at load with its place;
// once running, a broken edit keeps the rules in force.
func TestRulesFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RulesFileName)
	os.WriteFile(path, []byte("watch:\n  - name: far\n    spot: {instance_type: p5.48xlarge, region: westmars, below_usd_hour: 3}\n"), 0o600)
	check := func(w Spec) error {
		return Check(w, []domain.Descriptor{{Name: "sim", IsRegion: func(r string) bool { return r == "us-west-2" }}})
	}
	_, err := New(Options{State: openState(t, dir), RulesFile: path, Check: check})
	var ke *config.KeyError
	var fe *config.FileError
	if err == nil || !strings.HasPrefix(err.Error(), path+":3:40:") || !errors.As(err, &fe) || !errors.As(err, &ke) || ke.Key != "watch[0].spot.region" {
		t.Fatalf("New = %v, want %s:3:40: and a rule error", err, path)
	}
	os.WriteFile(path, []byte("watch:\n  - name: near\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 3}\n"), 0o600)
	var log testutil.Buffer
	e, err := New(Options{State: openState(t, dir), RulesFile: path, Check: check, Logger: logger(&log)})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("watch:\n  - name: near\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 0}\n"), 0o600)
	os.Chtimes(path, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	e.reloadRulesFile()
	if rs := e.Rules(); len(rs) != 1 || *rs[0].Cond.(*SpotRule).BelowUSDHour != 3 || !strings.Contains(log.String(), "does not read") {
		t.Errorf("after a broken edit: %+v\n%s", rs, log.String())
	}
}

// A spot or bucket rule decides nothing on a market still loading or a
// source gone stale: a restart must not read "no pool yet" as "above the
// figure" and tell the next dip again.
func TestNothingDecidedOnHalfAMarket(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e := newEvaluator(t, Options{Now: newClock(now).Now, Rules: validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	ctx := context.Background()
	e.evalSnapshot(ctx, snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10}))
	loading := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 30})
	loading.Ready = false
	stale := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 30})
	stale.Sources[0].Stale = true
	failed := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 30})
	failed.Sources[0].Regions = []feed.RegionStatus{{Region: "us-west-2", Err: "throttled"}}
	for _, s := range []*feed.Snapshot{loading, stale, failed, snapshotOf(now, nil)} {
		e.evalSnapshot(ctx, s)
	}
	e.evalSnapshot(ctx, snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10}))
	if n := e.fired.Load(); n != 1 {
		t.Errorf("fired %d, want 1: the price never rose above the figure on a current market", n)
	}
	if rs := e.Rules(); !rs[0].Active {
		t.Errorf("rule %+v: want its condition holding", rs[0])
	}
}

// A bucket rule tells a rise once, not the first bucket seen, and a
// rise short of at_least not at all.
func TestBucketRises(t *testing.T) {
	clk := newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	rules := validRules(t, config.Notify{},
		Spec{Name: "any", Cond: &BucketRule{InstanceType: "p5.48xlarge", Region: "us-west-2"}},
		Spec{Name: "bad", Cond: &BucketRule{InstanceType: "p5.48xlarge", Region: "us-west-2", AtLeast: ">20%"}})
	e := newEvaluator(t, Options{Now: clk.Now, Rules: rules})
	market := func(buckets ...string) *feed.Snapshot {
		prices := map[domain.Pool]float64{}
		for i := range buckets {
			p := p5("us-west-2" + string(rune('a'+i)))
			prices[p] = 10
		}
		s := snapshotOf(clk.Now(), prices)
		for i := range s.Pools {
			zone := s.Pools[i].Zone
			s.Pools[i].Interruption = &domain.Interruption{Bucket: buckets[zone[len(zone)-1]-'a']}
		}
		return s
	}
	ctx := context.Background()
	count := func() (any, bad int) {
		for _, a := range e.Alerts(0) {
			if a.Rule == "any" {
				any++
			} else {
				bad++
			}
		}
		return
	}
	e.evalSnapshot(ctx, market("<5%", "10-15%")) // baseline
	if a, b := count(); a+b != 0 {
		t.Fatalf("the first buckets seen were told")
	}
	clk.Add(2 * time.Hour)
	e.evalSnapshot(ctx, market("5-10%", "10-15%"))
	e.evalSnapshot(ctx, market("5-10%", "10-15%"))
	if a, b := count(); a != 1 || b != 0 {
		t.Fatalf("after a rise to 5-10%%: %d, %d alerts, want 1, 0", a, b)
	}
	as := e.Alerts(0)
	if *as[0].Bucket != "5-10%" || *as[0].PreviousBucket != "<5%" || !strings.Contains(as[0].Text, "us-west-2a <5% → 5-10%") {
		t.Errorf("alert %+v %s", as[0], as[0].Text)
	}
	clk.Add(2 * time.Hour)
	e.evalSnapshot(ctx, market("5-10%", ">20%"))
	if a, b := count(); a != 2 || b != 1 {
		t.Fatalf("after a rise to >20%%: %d, %d alerts, want 2, 1", a, b)
	}
	// A fall, then the same rise, is a rise again (after the cooldown).
	clk.Add(2 * time.Hour)
	e.evalSnapshot(ctx, market("5-10%", "10-15%"))
	clk.Add(2 * time.Hour)
	e.evalSnapshot(ctx, market("5-10%", ">20%"))
	if a, b := count(); a != 3 || b != 2 {
		t.Fatalf("after fall and rise: %d, %d alerts, want 3, 2", a, b)
	}
}

// Sanity: a hook that is never reached leaves the delivery owed, not
// lost, when its retries are not used up.
func TestUnreachableHookStaysOwed(t *testing.T) {
	srv := newHook(t, 200)
	url := srv.srv.URL
	srv.srv.Close()
	var log testutil.Buffer
	e := webhookEvaluator(t, fastWebhook(url, 10, 200*time.Millisecond), &log)
	raiseOne(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e.Once(ctx, nil)
	d := deliveries(t, e)
	if d[0].State != DeliveryPending || d[0].Attempts < 1 || !strings.Contains(d[0].Error, "POST http://127.0.0.1") {
		t.Errorf("delivery %+v, want owed with the error", d)
	}
	_ = http.StatusOK
}

// An alert already shared (raised here, then read back from the state by
// a pull that began before it was raised) is not passed to the sessions
// a second time.
func TestAlertSharedOnce(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e := newEvaluator(t, Options{Now: newClock(now).Now, Rules: validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	sub := e.Subscribe(ctxT(t))
	raiseOne(t, e)
	<-sub
	e.share(e.Alerts(0)) // the pull's copy of the same alert
	if as := e.Alerts(0); len(as) != 1 {
		t.Fatalf("%d alerts for the sessions, want the one raised", len(as))
	}
	select {
	case <-sub:
		t.Error("the sessions were woken again for an alert they have")
	default:
	}
}
