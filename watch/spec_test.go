package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// loadRules reads a config file of body as every command does: the
// config, then its rules.
func loadRules(t *testing.T, body string) (string, config.Config, []Spec, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		return p, c, nil, err
	}
	specs, err := ConfigRules(c)
	return p, c, specs, err
}

// shapeExample is the config shape other tools write.
const shapeExample = `watch:
  - name: h100-thursday
    block: {gpu: H100, gpus: 16, hours: 48, start_after: "2026-12-03", start_before: "2026-12-05", max_usd_gpu_hour: 6}
  - name: cheap-p5
    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 20}
    cooldown: 1h
notify:
  webhook: {url: "https://hooks.example.com/T000/B000/XXX", timeout: 5s}
  command: ["notify-send", "gpumarket"]
`

func TestWatchShape(t *testing.T) {
	_, c, w, err := loadRules(t, shapeExample)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 2 {
		t.Fatalf("watch: %+v", w)
	}
	b, blk := w[0], w[0].Cond.(*BlockRule)
	if b.Kind() != "block" || blk.GPU != "H100" || blk.GPUs != 16 || blk.Hours != 48 || *blk.MaxUSDGPUHour != 6 {
		t.Errorf("block rule %+v %+v", b, blk)
	}
	after, before, err := blk.Window(time.Now())
	if err != nil || !after.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) || !before.Equal(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("window %s %s %v", after, before, err)
	}
	// The block rule sets no cooldown: an hour; the spot rule's is its own.
	if b.CooldownOrDefault() != time.Hour || b.EveryOrDefault() != DefaultEvery {
		t.Errorf("block defaults: cooldown %s every %s", b.CooldownOrDefault(), b.EveryOrDefault())
	}
	s, spot := w[1], w[1].Cond.(*SpotRule)
	if s.Kind() != "spot" || spot.InstanceType != "p5.48xlarge" || spot.Region != "us-west-2" || spot.Zone != "" || *spot.BelowUSDHour != 20 || s.CooldownOrDefault() != time.Hour {
		t.Errorf("spot rule %+v %+v", s, spot)
	}
	n := c.Notify
	if n.Webhook == nil || n.Webhook.TimeoutOrDefault() != 5*time.Second || n.Webhook.RetriesOrDefault() != config.DefaultWebhookRetries ||
		len(n.Command) != 2 || n.CommandTimeoutOrDefault() != config.DefaultCommandTimeout {
		t.Errorf("notify %+v", n)
	}
	// No tell: the TUI and every notifier.
	if got := strings.Join(s.TellsOf(n), ","); got != "tui,command,webhook" {
		t.Errorf("tells %s", got)
	}
	// Where each key is written, for checks made above the config.
	if l, c := s.At("spot.region"); l != 5 || c != 40 {
		t.Errorf("spot.region at %d:%d, want 5:40", l, c)
	}
	if l, _ := s.At("spot.zone"); l != 5 { // not written: its section
		t.Errorf("spot.zone at line %d, want 5", l)
	}
}

func TestWatchKinds(t *testing.T) {
	_, c, w, err := loadRules(t, `watch:
  - name: calm
    bucket: {instance_type: P5.48XLARGE, region: us-east-1, zone: us-east-1a, at_least: "15-20"}
  - name: plan-h100
    plan: {gpu: "h100, h200", gpus: 16, hours: 48, start: "2026-12-03 09:00", deadline: "2026-12-06", below_usd_gpu_hour: 5}
    every: 30m
    tell: [tui]
  - name: starts-soon
    starts_in: {within: 1h, kind: block}
  - name: azure-cheap
    spot: {instance_type: standard_nd96isr_h100_v5, region: eastus, zone: "2", above_usd_hour: 30}
  - name: idle-fleets
    idle: {above_pct: 40, kind: fleet}
  - name: idle-now
    idle: {above_pct: 0, after: 0s}
`)
	if err != nil {
		t.Fatal(err)
	}
	if b := w[0].Cond.(*BucketRule); b.InstanceType != "p5.48xlarge" || b.AtLeast != "15-20%" {
		t.Errorf("bucket %+v: want the catalog's spelling and the canonical label", b)
	}
	plan := w[1].Cond.(*PlanRule)
	if plan.GPU != "H100,H200" || w[1].EveryOrDefault() != 30*time.Minute || plan.OnTimeOrDefault() != DefaultOnTimePct || plan.CheckpointOrDefault() != DefaultCheckpoint {
		t.Errorf("plan %+v", plan)
	}
	if si := w[2].Cond.(*StartsInRule); w[2].CooldownOrDefault() != 0 || si.Within.D() != time.Hour {
		t.Errorf("starts_in %+v: cooldown %s, want 0 (each row once)", si, w[2].CooldownOrDefault())
	}
	if it := w[3].Cond.(*SpotRule).InstanceType; it != "Standard_ND96isr_H100_v5" {
		t.Errorf("azure size %q", it)
	}
	if i := w[4].Cond.(*IdleRule); w[4].Kind() != "idle" || i.AbovePct != 40 || i.AfterOrDefault() != DefaultIdleAfter || w[4].CooldownOrDefault() != DefaultCooldown {
		t.Errorf("idle %+v: want 40%%, judged after %s, cooldown %s", i, DefaultIdleAfter, DefaultCooldown)
	}
	if a := w[5].Cond.(*IdleRule).AfterOrDefault(); a != 0 {
		t.Errorf("idle after: 0s is %s, want 0 (judged at once)", a)
	}
	// Validate again: nothing changes.
	before := *plan
	if err := ValidateSpecs(w, "watch", c.Notify); err != nil || *plan != before {
		t.Errorf("second Validate: %v %+v", err, plan)
	}
}

func TestWatchRuleErrors(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown GPU", "watch:\n  - name: x\n    block: {gpu: H900, gpus: 8, hours: 24}\n", []string{":3:13:", "watch[0].block.gpu", `unknown GPU "H900"`, "H100, A100"}},
		{"start before after", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 24, start_after: 2026-12-05, start_before: 2026-12-03}\n",
			[]string{":3:69:", "start_before", "not after start_after", "no block could start"}},
		{"bad start", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 24, start_after: thursday}\n", []string{"watch[0].block.start_after", "RFC 3339"}},
		{"price 0", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 24, max_usd_gpu_hour: 0}\n", []string{"max_usd_gpu_hour", "above 0"}},
		{"gpus and instances", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, instances: 1, hours: 24}\n", []string{"block.instances", "one of them"}},
		{"no gpus", "watch:\n  - name: x\n    block: {gpu: H100, hours: 24}\n", []string{":3:5:", "watch[0].block: gpus: missing"}},
		{"too many hours", "watch:\n  - name: x\n    block: {gpu: H100, gpus: 8, hours: 5000}\n", []string{"block.hours", "4368"}},
		{"below 0", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 0}\n",
			[]string{":3:59:", "below_usd_hour", "could never fire", "above 0"}},
		{"negative below", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: -3}\n", []string{"below_usd_hour", "never fire"}},
		{"both bounds", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 3, above_usd_hour: 9}\n", []string{"above_usd_hour", "two rules"}},
		{"no bound", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2}\n", []string{"below_usd_hour or above_usd_hour: missing"}},
		{"unknown type", "watch:\n  - name: x\n    spot: {instance_type: p9.huge, region: us-west-2, below_usd_hour: 3}\n", []string{"spot.instance_type", "p5.48xlarge"}},
		{"bad region", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: US_WEST, below_usd_hour: 3}\n", []string{"spot.region", "us-east-1"}},
		{"zone of another region", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2, zone: us-east-1a, below_usd_hour: 3}\n", []string{"spot.zone", "us-west-2a"}},
		{"bad provider", "watch:\n  - name: x\n    spot: {instance_type: p5.48xlarge, region: us-west-2, provider: OCI, below_usd_hour: 3}\n", []string{"spot.provider", "provider's name"}},
		{"calmest bucket", "watch:\n  - name: x\n    bucket: {instance_type: p5.48xlarge, region: us-west-2, at_least: \"<5%\"}\n", []string{"bucket.at_least", "never fire", "5-10%"}},
		{"late deadline", "watch:\n  - name: x\n    plan: {gpu: H100, gpus: 8, hours: 48, start: 2026-12-03, deadline: 2026-12-04, below_usd: 100}\n",
			[]string{"plan.deadline", "no plan could be on time"}},
		{"plan no figure", "watch:\n  - name: x\n    plan: {gpu: H100, gpus: 8, hours: 4, start: 2026-12-03, deadline: 2026-12-04}\n", []string{"below_usd or below_usd_gpu_hour: missing"}},
		{"plan no deadline", "watch:\n  - name: x\n    plan: {gpu: H100, gpus: 8, hours: 4, start: 2026-12-03, below_usd: 9}\n", []string{":3:5:", "plan: deadline: missing"}},
		{"within 0", "watch:\n  - name: x\n    starts_in: {within: 0s}\n", []string{"starts_in: within 0s", "never fire"}},
		{"starts_in kind", "watch:\n  - name: x\n    starts_in: {within: 1h, kind: spot}\n", []string{"starts_in.kind", "block, reservation or fleet"}},
		{"idle 100", "watch:\n  - name: x\n    idle: {above_pct: 100}\n", []string{":3:12:", "idle.above_pct", "never fire", "0 to 99"}},
		{"idle negative", "watch:\n  - name: x\n    idle: {above_pct: -5}\n", []string{"idle.above_pct", "0 to 99"}},
		{"idle kind", "watch:\n  - name: x\n    idle: {above_pct: 40, kind: spot}\n", []string{"idle.kind", "block, reservation or fleet"}},
		{"idle after", "watch:\n  - name: x\n    idle: {above_pct: 40, after: 200h}\n", []string{"idle.after", "0s to 168h"}},
		{"idle every", "watch:\n  - name: x\n    idle: {above_pct: 40}\n    every: 5m\n", []string{"every", "follows the usage report"}},
		{"no name", "watch:\n  - block: {gpu: H100, gpus: 8, hours: 24}\n", []string{":2:", "name: missing"}},
		{"bad name", "watch:\n  - name: \"my rule!\"\n    starts_in: {within: 1h}\n", []string{"watch[0].name", "letters, digits"}},
		{"same name", "watch:\n  - name: a\n    starts_in: {within: 1h}\n  - name: a\n    starts_in: {within: 2h}\n", []string{":4:5:", "watch[1].name", "another rule"}},
		{"no condition", "watch:\n  - name: a\n    cooldown: 1h\n", []string{"no condition", "block, bucket, idle, plan, spot, starts_in"}},
		{"two conditions", "watch:\n  - name: a\n    starts_in: {within: 1h}\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 3}\n", []string{"one condition per rule"}},
		{"negative cooldown", "watch:\n  - name: a\n    starts_in: {within: 1h}\n    cooldown: -1h\n", []string{":4:5:", "cooldown", "0s to 720h"}},
		{"every on spot", "watch:\n  - name: a\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: 3}\n    every: 5m\n", []string{"every", "block and plan"}},
		{"every too often", "watch:\n  - name: a\n    block: {gpu: H100, gpus: 8, hours: 24}\n    every: 10s\n", []string{"every", "1m to 24h"}},
		{"tell unconfigured", "watch:\n  - name: a\n    starts_in: {within: 1h}\n    tell: [webhook]\n", []string{":4:12:", "tell[0]", "notify.webhook is not set", "tui"}},
		{"tell unknown", "watch:\n  - name: a\n    starts_in: {within: 1h}\n    tell: [email]\n", []string{"tell[0]", "tui, command, webhook"}},
		{"unknown rule key", "watch:\n  - name: a\n    spott: {}\n", []string{":3:5:", `unknown key "spott"`, "name, block, bucket"}},
		{"unknown block key", "watch:\n  - name: a\n    block: {gpu: H100, gpus: 8, hours: 24, price: 3}\n", []string{`unknown key "price"`, "max_usd_gpu_hour"}},
		{"price not a number", "watch:\n  - name: a\n    spot: {instance_type: p5.48xlarge, region: us-west-2, below_usd_hour: abc}\n",
			[]string{":3:75:", "watch[0].spot.below_usd_hour: want a number"}},
		{"tell not a list", "watch:\n  - name: a\n    tell: tui\n    starts_in: {within: 1h}\n", []string{":3:11:", ": watch[0].tell: want a list such as [a, b]"}},
		{"hours not whole", "watch:\n  - name: a\n    block: {gpu: H100, gpus: 8, hours: 1.5}\n", []string{":3:33:", "block.hours", "whole hours"}},
		{"webhook url", "notify:\n  webhook: {url: \"ftp://hooks.example.com/secret\"}\n", []string{":2:13:", "notify.webhook.url", "https://"}},
		{"webhook retries", "notify:\n  webhook: {url: \"https://h.example.com/x\", retries: 99}\n", []string{"notify.webhook.retries", "0 to 10"}},
		{"empty command", "notify:\n  command: [\"\"]\n", []string{"notify.command[0]", "notify-send"}},
		{"command timeout", "notify:\n  command: [true]\n  command_timeout: -1s\n", []string{"notify.command_timeout", "10s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _, _, err := loadRules(t, c.body)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with the file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Count(msg, "watch[0].") > 1 {
				t.Errorf("error %q names its key twice", msg)
			}
		})
	}
}

// A bad rule is bad usage, placed in its file: the command line tells
// it by its type.
func TestRuleErrorIsFound(t *testing.T) {
	_, _, _, err := loadRules(t, "watch:\n  - name: x\n    starts_in: {within: 0s}\n")
	var fe *config.FileError
	var ke *config.KeyError
	if !errors.As(err, &fe) || !errors.As(err, &ke) || ke.Key != "watch[0].starts_in" || fe.Line != 3 {
		t.Fatalf("%v: want a *config.FileError at line 3 for watch[0].starts_in", err)
	}
}

// The webhook URL's path is its secret: a refusal does not print it.
func TestWebhookURLRedacted(t *testing.T) {
	_, _, _, err := loadRules(t, "notify:\n  webhook: {url: \"ftp://hooks.example.com/T000/B000/SECRET\"}\n")
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("%v", err)
	}
	if got := config.RedactURL("https://hooks.slack.com/services/T0/B0/XXX"); got != "https://hooks.slack.com/…" {
		t.Errorf("RedactURL = %q", got)
	}
}

func TestRulesFileRoundTrip(t *testing.T) {
	below, most := 18.5, 5.25
	rules := []Spec{
		{Name: "spot-1", Cond: &SpotRule{InstanceType: "p5.48xlarge", Region: "us-west-2", Zone: "us-west-2a", BelowUSDHour: &below}, MadeBy: "local:alice"},
		{Name: "block-1", Cond: &BlockRule{GPU: "H100", GPUs: 16, Hours: 48, StartAfter: "2026-12-03T00:00:00Z", MaxUSDGPUHour: &most}, Cooldown: ptr(config.Duration(2 * time.Hour)), Tell: []string{TellTUI}},
	}
	data, err := MarshalRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), RulesFileHeader) {
		t.Errorf("no header:\n%s", data)
	}
	got, err := ParseRules("rules.yaml", data, config.Notify{})
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(got) != 2 || got[0].Cond.(*SpotRule).Zone != "us-west-2a" || *got[0].Cond.(*SpotRule).BelowUSDHour != below || got[0].MadeBy != "local:alice" ||
		got[1].Cond.(*BlockRule).GPUs != 16 || *got[1].Cond.(*BlockRule).MaxUSDGPUHour != most || got[1].CooldownOrDefault() != 2*time.Hour || got[1].Tell[0] != TellTUI {
		t.Errorf("round trip:\n%s\n%+v", data, got)
	}
	// A hand edit that breaks a rule is placed in the rules file.
	bad := strings.Replace(string(data), "us-west-2a", "eu-west-1a", 1)
	if _, err := ParseRules("rules.yaml", []byte(bad), config.Notify{}); err == nil || !strings.HasPrefix(err.Error(), "rules.yaml:") || !strings.Contains(err.Error(), "spot.zone") {
		t.Errorf("bad edit: %v", err)
	}
	if got, err := ParseRules("rules.yaml", []byte(RulesFileHeader), config.Notify{}); err != nil || len(got) != 0 {
		t.Errorf("empty rules file: %v %v", got, err)
	}
}

func ptr[T any](v T) *T { return &v }

func FuzzParseRules(f *testing.F) {
	f.Add([]byte(shapeExample))
	f.Add([]byte("watch:\n  - name: a\n    starts_in: {within: 1h}\n"))
	f.Add([]byte("watch: [{name: b, bucket: {instance_type: p5.48xlarge, region: us-east-1}}]\n"))
	f.Add([]byte("watch: [{name: c, idle: {above_pct: 40, after: 1h, kind: fleet}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRules("fuzz.yaml", data, config.Notify{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := ValidateSpecs(rules, "watch", config.Notify{}); err != nil {
			t.Fatalf("ParseRules accepted %q but ValidateRules says %v", data, err)
		}
		for _, r := range rules {
			if r.Kind() == "" {
				t.Fatalf("accepted a rule with no condition: %+v", r)
			}
		}
	})
}

// The README's Watch example reads, rules and all.
func TestREADMEWatchExampleReads(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Watch: rules and alerts")
	if i < 0 {
		t.Fatal("no Watch section in the README")
	}
	i = strings.Index(readme[i:], "```yaml\n") + i + len("```yaml\n")
	j := strings.Index(readme[i:], "```") + i
	_, _, specs, err := loadRules(t, readme[i:j])
	if err != nil || len(specs) < 5 {
		t.Fatalf("the README's watch example: %d rules, %v", len(specs), err)
	}
}

// searches records the block searches asked, and finds nothing.
type searches struct {
	mu sync.Mutex
	qs []domain.OfferingQuery
}

func (s *searches) FindOfferings(_ context.Context, q domain.OfferingQuery) (ledger.Search, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.qs = append(s.qs, q)
	return ledger.Search{}, nil
}

// A time in a rule reads as it does everywhere else: "2026-12-03 11:30"
// is local (it was UTC in rules only), "+1d" and "tomorrow 09:00" are
// taken (plan.start refused "+1d"), and a time relative to now is read
// again at each evaluation.
func TestRuleTimesReadAsEverywhere(t *testing.T) {
	east := time.FixedZone("EST", -5*3600)
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, east)
	b := &BlockRule{GPU: "H100", GPUs: 8, Hours: 24, StartAfter: "2026-12-03 11:30", StartBefore: "tomorrow 09:00"}
	after, before, err := b.Window(now)
	if err != nil || !after.Equal(time.Date(2026, 12, 3, 16, 30, 0, 0, time.UTC)) || !before.Equal(time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)) {
		t.Fatalf("window %v – %v, %v", after, before, err)
	}
	want, _ := domain.ParseWhen("2026-12-03 11:30", now)
	if !after.Equal(want) {
		t.Errorf("a rule reads %v where plan --start reads %v", after, want)
	}
	p := &PlanRule{GPU: "H100", GPUs: 8, Hours: 4, Start: "+1d", Deadline: "+3d", BelowUSD: f64(100)}
	if err := p.Validate(); err != nil {
		t.Fatalf("plan.start +1d: %v", err)
	}
	if start, _, _ := p.Window(now); !start.Equal(now.Add(24 * time.Hour)) {
		t.Errorf("start +1d read as %v", start)
	}
	// Read again as the clock moves: the search moves with it.
	clk := newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := &searches{}
	rule := Spec{Name: "soon", Cond: &BlockRule{GPU: "H100", GPUs: 8, Hours: 24, StartAfter: "+2d", StartBefore: "+5d"}}
	e := newEvaluator(t, Options{Offerings: s, Now: clk.Now, Rules: validRules(t, config.Notify{}, rule)})
	e.tick(context.Background(), true)
	clk.Add(24 * time.Hour)
	e.tick(context.Background(), true)
	if len(s.qs) != 2 || s.qs[1].StartAfter.Sub(s.qs[0].StartAfter) != 24*time.Hour || !s.qs[0].StartAfter.Equal(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("searches %+v: want a window starting 2 days from each evaluation", s.qs)
	}
	if _, err := ParseRuleTime("2026-13-01", now); err == nil || !strings.Contains(err.Error(), "such as 2026-12-03 09:00") {
		t.Errorf("a bad time: %v; want an example dated from today", err)
	}
}

// A plan rule made with its start or deadline already passed is refused
// (a typo in the month, say); one with no start starts now.
func TestPlanRuleWindowInThePastRefused(t *testing.T) {
	// Validate reads relative times against the wall clock: the rule's
	// times are dated from it.
	now := time.Now().UTC().Truncate(time.Minute)
	day := func(d int) string { return now.AddDate(0, 0, d).Format("2006-01-02") + " 09:00" }
	stamp := func(d int) string { return now.AddDate(0, 0, d).Format("2006-01-02") + " 09:00 UTC" }
	dir := t.TempDir()
	e := newEvaluator(t, Options{Now: newClock(now).Now, State: openState(t, dir), RulesFile: filepath.Join(dir, RulesFileName)})
	for _, c := range []struct {
		start, deadline, says string
	}{
		{day(-30), day(-28), "start: " + stamp(-30) + " has passed"},
		{day(-1), day(4), "start: " + stamp(-1) + " has passed"},
	} {
		_, err := e.AddRule(context.Background(), Spec{Cond: &PlanRule{GPU: "H100", GPUs: 8, Hours: 4, Start: c.start, Deadline: c.deadline, BelowUSD: f64(100)}})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("start %s, deadline %s: %v; want %q", c.start, c.deadline, err, c.says)
		}
	}
	r, err := e.AddRule(context.Background(), Spec{Cond: &PlanRule{GPU: "H100", GPUs: 8, Hours: 4, Deadline: day(4), BelowUSD: f64(100)}})
	if err != nil {
		t.Fatal(err)
	}
	if start, _, _ := r.Cond.(*PlanRule).Window(now); !start.Equal(now) {
		t.Errorf("no start reads as %v, want now", start)
	}
}
