package watch

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
)

// clockRule is a kind of rule that exists only in this file: it fires
// once its time has come. It is all a new kind needs.
type clockRule struct {
	At string `yaml:"at"`
}

func (c *clockRule) Validate() error {
	if _, err := ParseRuleTime(c.At, time.Now()); err != nil {
		return ruleErr("at", "%v", err)
	}
	return nil
}

func (c *clockRule) Describe() string { return "the clock reaches " + c.At }

func (c *clockRule) evaluate(ctx context.Context, e *Evaluator, r Rule, _ *round) {
	now := e.now()
	at, _ := ParseRuleTime(c.At, now)
	e.step(ctx, r, crossing(!now.Before(at), now, r.Cooldown, func() *Alert {
		return &Alert{Text: "it is " + at.UTC().Format(time.RFC3339)}
	}))
}

// registerClock adds the clock kind for one test.
func registerClock(t *testing.T) {
	k := Kind{Name: "clock", New: func() Condition { return &clockRule{} }, When: onTick, Follows: "clock"}
	register(k)
	t.Cleanup(func() {
		delete(kinds, k.Name)
		delete(kindByType, reflect.TypeOf(k.New()))
	})
}

// A kind of rule is one file: the clock kind, defined above only, is
// read from a config, checked, evaluated, told, saved to the rules file
// and read back, with no other change.
func TestAKindIsOneFile(t *testing.T) {
	registerClock(t)
	_, c, specs, err := loadRules(t, "watch:\n  - name: noon\n    clock: {at: \"2026-12-01 12:00\"}\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := loadRules(t, "watch:\n  - name: noon\n    clock: {at: noonish}\n"); err == nil || !strings.Contains(err.Error(), "watch[0].clock.at") {
		t.Fatalf("a bad clock rule: %v", err)
	}
	dir := t.TempDir()
	clk := newClock(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	e, err := New(Options{State: openState(t, dir), Now: clk.Now, Rules: specs, Notify: c.Notify, RulesFile: filepath.Join(dir, RulesFileName)})
	if err != nil {
		t.Fatal(err)
	}
	e.tick(context.Background(), false)
	clk.Set(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	e.tick(context.Background(), false)
	e.tick(context.Background(), false)
	as := e.Alerts(0)
	if len(as) != 1 || as[0].Kind != "clock" || as[0].Text != "it is 2026-12-01T12:00:00Z" {
		t.Fatalf("alerts %+v, want one when the clock reached noon", as)
	}
	if rs := e.Rules(); rs[0].Describe() != "the clock reaches 2026-12-01 12:00" {
		t.Errorf("described as %q", rs[0].Describe())
	}
	made, err := e.AddRule(context.Background(), Spec{Name: "tea", Cond: &clockRule{At: "2026-12-01 16:00"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(e.RulesFile())
	back, err := ParseRules("rules.yaml", data, config.Notify{})
	if err != nil || len(back) != 1 || back[0].Cond.(*clockRule).At != "2026-12-01 16:00" || back[0].Kind() != "clock" {
		t.Fatalf("the rules file:\n%s\nread back %+v, %v", data, back, err)
	}
	if made.Fingerprint == "" || made.Fingerprint == e.Rules()[0].Fingerprint {
		t.Errorf("fingerprints %q and %q", made.Fingerprint, e.Rules()[0].Fingerprint)
	}
}
