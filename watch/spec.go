package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

// Condition is what a rule waits for, under its kind's key; a kind is one file (docs/DESIGN.md).
type Condition interface {
	// Validate checks the condition and spells its names the catalog's way (*config.KeyError).
	Validate() error
	Describe() string
	evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round)
}

// Optional abilities of a condition, by type assertion: serving checks, the
// market it reads, whether a new rule's window passed.
type (
	checker interface {
		check(inUse []domain.Descriptor) error
	}
	marketReader interface {
		reads() marketNeed
	}
	expirer interface {
		expired(now time.Time) error
	}
)

type trigger int

const (
	onMarket   trigger = iota // each ready market snapshot
	onTick                    // every Options.Tick
	onSchedule                // every `every:` (a search or a plan)
)

// Kind is a kind of rule: Name is its key in a rule.
type Kind struct {
	Name string
	New  func() Condition
	When trigger
	// Follows says what a kind off a schedule follows ("market feed").
	Follows string
	// TellsEach: each thing is told once, however close together: no default cooldown.
	TellsEach bool
}

var (
	kinds      = map[string]Kind{}
	kindByType = map[reflect.Type]string{}
)

// register adds a kind; each kind's file calls it from init.
func register(k Kind) {
	kinds[k.Name] = k
	kindByType[reflect.TypeOf(k.New())] = k.Name
}

// KindNames lists the kinds of rule, for messages.
func KindNames() []string {
	return slices.Sorted(maps.Keys(kinds))
}

// Where alerts are told (`tell:`): the TUI, notify.command, notify.webhook.
const (
	TellTUI     = "tui"
	TellCommand = "command"
	TellWebhook = "webhook"
)

// Tells lists what `tell:` accepts.
var Tells = []string{TellTUI, TellCommand, TellWebhook}

// Rule defaults and limits; a schedule runs every 10 minutes: a block search asks every region.
const (
	DefaultCooldown = time.Hour
	DefaultEvery    = 10 * time.Minute
	MinEvery        = time.Minute
	MaxCooldown     = 30 * 24 * time.Hour
)

// Spec is a rule as written; a nil Cooldown is the kind's default, an empty
// Tell every channel, MadeBy who made it in the TUI.
type Spec struct {
	Name     string           `yaml:"name"`
	Cond     Condition        `yaml:"-"` // under its kind's key
	Cooldown *config.Duration `yaml:"cooldown,omitempty"`
	Every    config.Duration  `yaml:"every,omitempty"`
	Tell     []string         `yaml:"tell,omitempty"`
	MadeBy   string           `yaml:"made_by,omitempty"`

	// pos places the rule's keys ("spot.region"), for later checks.
	pos map[string]config.Pos
}

var specKeys = []string{"name", "cooldown", "every", "tell", "made_by"}

// Kind returns the rule's kind, "" without a condition.
func (s Spec) Kind() string {
	if s.Cond == nil {
		return ""
	}
	return kindByType[reflect.TypeOf(s.Cond)]
}

func (s Spec) CooldownOrDefault() time.Duration {
	if s.Cooldown != nil {
		return s.Cooldown.D()
	}
	if kinds[s.Kind()].TellsEach {
		return 0
	}
	return DefaultCooldown
}

func (s Spec) EveryOrDefault() time.Duration {
	if s.Every > 0 {
		return s.Every.D()
	}
	return DefaultEvery
}

// TellsOf returns where the rule's alerts go with the notifiers of n.
func (s Spec) TellsOf(n config.Notify) []string {
	if len(s.Tell) > 0 {
		return s.Tell
	}
	return channels(n)
}

func channels(n config.Notify) []string {
	out := []string{TellTUI}
	if len(n.Command) > 0 {
		out = append(out, TellCommand)
	}
	if n.Webhook != nil {
		out = append(out, TellWebhook)
	}
	return out
}

// At returns where a key is written, else its section or the rule (0, 0: unknown).
func (s Spec) At(key string) (line, col int) {
	for k := key; ; {
		if p, ok := s.pos[k]; ok {
			return p.Line, p.Col
		}
		if k == "" {
			return 0, 0
		}
		if i := strings.LastIndexAny(k, ".["); i >= 0 {
			k = k[:i]
		} else {
			k = ""
		}
	}
}

// decodeSpec reads a rule's node written at key ("watch[2]").
func decodeSpec(node ast.Node, key string) (Spec, error) {
	es, ok := config.Entries(node)
	if !ok {
		return Spec{}, config.NodeError(node, "%s: want a mapping of a name and one condition (%s), not a value", key, strings.Join(KindNames(), ", "))
	}
	full := map[string]config.Pos{}
	if p, ok := config.PosOf(node); ok {
		full[key] = p
	}
	var common, conds []*ast.MappingValueNode
	for _, mv := range es {
		if mv == nil || mv.Key == nil {
			continue
		}
		k := config.KeyText(mv.Key)
		switch _, kind := kinds[k]; {
		case kind:
			conds = append(conds, mv)
			if p, ok := config.PosOf(mv.Key); ok {
				full[key+"."+k] = p
			}
		case slices.Contains(specKeys, k) || k == "<<":
			common = append(common, mv)
		default:
			return Spec{}, config.NodeError(mv.Key, "unknown key %q in %s; want one of %s", k, key, strings.Join(append(append([]string{"name"}, KindNames()...), specKeys[1:]...), ", "))
		}
	}
	var s Spec
	if len(common) > 0 {
		m := ast.Mapping(common[0].GetToken(), false, common...)
		if err := config.Decode(m, &s, key, full); err != nil {
			return Spec{}, err
		}
	}
	if len(conds) > 0 {
		name := config.KeyText(conds[0].Key)
		s.Cond = kinds[name].New()
		if err := config.Decode(conds[0].Value, s.Cond, key+"."+name, full); err != nil {
			return Spec{}, err
		}
	}
	s.pos = relative(full, key)
	if len(conds) > 1 {
		return s, tooMany(s, key, conds)
	}
	return s, nil
}

func tooMany(s Spec, key string, conds []*ast.MappingValueNode) error {
	var names []string
	for _, mv := range conds {
		names = append(names, config.KeyText(mv.Key))
	}
	return ruleErr(key+"."+names[1], "rule %q has conditions %s; want one condition per rule (make one rule for each)", s.Name, strings.Join(names, " and "))
}

func relative(full map[string]config.Pos, key string) map[string]config.Pos {
	out := map[string]config.Pos{}
	for k, p := range full {
		switch {
		case k == key:
			out[""] = p
		case strings.HasPrefix(k, key+"."):
			out[k[len(key)+1:]] = p
		}
	}
	return out
}

func ruleErr(key, format string, args ...any) error {
	return &config.KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

func under(key string, err error) error {
	var ke *config.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	k := key
	if ke.Key != "" {
		k += "." + ke.Key
	}
	return &config.KeyError{Key: k, Msg: ke.Msg}
}

// ruleNameRE: a name appears in logs, file names and the environment.
var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

const RuleNameForm = "1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit, such as h100-thursday"

// Validate checks the rule with n's notifiers; key names it in errors.
func (s *Spec) Validate(key string, n config.Notify) error {
	if s.Name == "" {
		return ruleErr(key, "name: missing; want a name: %s", RuleNameForm)
	}
	if !ruleNameRE.MatchString(s.Name) {
		return ruleErr(key+".name", "%q: want %s", s.Name, RuleNameForm)
	}
	kind, ok := kinds[s.Kind()]
	if !ok {
		return ruleErr(key, "rule %q has no condition; want one of %s", s.Name, strings.Join(KindNames(), ", "))
	}
	if s.Cooldown != nil && (s.Cooldown.D() < 0 || s.Cooldown.D() > MaxCooldown) {
		return ruleErr(key+".cooldown", "%s; want a duration from 0s to 720h such as 1h (default %s)", s.Cooldown.D(), Spec{Cond: s.Cond}.CooldownOrDefault())
	}
	if err := s.validateEvery(key, kind); err != nil {
		return err
	}
	for i, t := range s.Tell {
		k := fmt.Sprintf("%s.tell[%d]", key, i)
		switch {
		case !slices.Contains(Tells, t):
			return ruleErr(k, "unknown %q; want one of %s", t, strings.Join(Tells, ", "))
		case t == TellCommand && len(n.Command) == 0:
			return ruleErr(k, "command: notify.command is not set; set it, or tell %s", strings.Join(channels(n), ", "))
		case t == TellWebhook && n.Webhook == nil:
			return ruleErr(k, "webhook: notify.webhook is not set; set it, or tell %s", strings.Join(channels(n), ", "))
		case slices.Contains(s.Tell[:i], t):
			return ruleErr(k, "%s is named twice", t)
		}
	}
	return under(key+"."+kind.Name, s.Cond.Validate())
}

func (s *Spec) validateEvery(key string, kind Kind) error {
	if s.Every == 0 {
		return nil
	}
	if kind.When != onSchedule {
		var timed []string
		for _, n := range KindNames() {
			if kinds[n].When == onSchedule {
				timed = append(timed, n)
			}
		}
		return ruleErr(key+".every", "applies to %s rules; a %s rule follows the %s", strings.Join(timed, " and "), kind.Name, kind.Follows)
	}
	if s.Every.D() < MinEvery || s.Every.D() > 24*time.Hour {
		return ruleErr(key+".every", "%s; want a duration from 1m to 24h such as 10m (a block search asks every region of every cloud)", s.Every.D())
	}
	return nil
}

// ValidateSpecs checks rules written under key; a name is used once.
func ValidateSpecs(specs []Spec, key string, n config.Notify) error {
	seen := map[string]bool{}
	for i := range specs {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := specs[i].Validate(k, n); err != nil {
			return err
		}
		if seen[specs[i].Name] {
			return ruleErr(k+".name", "%q names another rule too; want a name of its own", specs[i].Name)
		}
		seen[specs[i].Name] = true
	}
	return nil
}

func decodeList(file string, nodes []ast.Node, n config.Notify) ([]Spec, error) {
	specs := make([]Spec, 0, len(nodes))
	for i, node := range nodes {
		s, err := decodeSpec(node, fmt.Sprintf("watch[%d]", i))
		if err != nil {
			return nil, placed(file, s, fmt.Sprintf("watch[%d]", i), err)
		}
		specs = append(specs, s)
	}
	if err := ValidateSpecs(specs, "watch", n); err != nil {
		var ke *config.KeyError
		if errors.As(err, &ke) {
			var i int
			fmt.Sscanf(ke.Key, "watch[%d]", &i)
			return nil, placed(file, specs[i], fmt.Sprintf("watch[%d]", i), err)
		}
		return nil, err
	}
	return specs, nil
}

// placed puts an error of rule s at its file:line:col: bad usage.
func placed(file string, s Spec, key string, err error) error {
	var ke *config.KeyError
	if !errors.As(err, &ke) {
		return config.InFile(file, err)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(ke.Key, key), ".")
	line, col := s.At(rel)
	return &config.FileError{Path: file, Line: line, Col: col, Err: ke}
}

// ConfigRules reads and checks the config's `watch:` rules.
func ConfigRules(c config.Config) ([]Spec, error) {
	return decodeList(c.Path, c.Watch, c.Notify)
}

const RulesFileHeader = `# Watch rules made in gpumarket's TUI (key a). Same shape as the config's
# watch: list (see the README's Watch section); gpumarket rewrites this file
# when a rule is made or deleted in the TUI, and reads it again when it
# changes. Edit or delete rules here, or move them into the config.
`

// ParseRules reads a rules file's `watch:` list, errors at file:line:col.
func ParseRules(name string, data []byte, n config.Notify) ([]Spec, error) {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, config.InFile(name, err)
	}
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, null := doc.Body.(*ast.NullNode); null {
			continue
		}
		var rf struct {
			Watch config.Rules `yaml:"watch"`
		}
		if err := config.Decode(doc.Body, &rf, "", map[string]config.Pos{}); err != nil {
			return nil, config.InFile(name, err)
		}
		return decodeList(name, rf.Watch, n) // one document: the file gpumarket writes
	}
	return nil, nil
}

// MarshalRules writes rules as ParseRules reads them, under the header.
func MarshalRules(specs []Spec) ([]byte, error) {
	list := make([]yaml.MapSlice, 0, len(specs))
	for _, s := range specs {
		m := yaml.MapSlice{{Key: "name", Value: s.Name}, {Key: s.Kind(), Value: s.Cond}}
		if s.Cooldown != nil {
			m = append(m, yaml.MapItem{Key: "cooldown", Value: *s.Cooldown})
		}
		if s.Every != 0 {
			m = append(m, yaml.MapItem{Key: "every", Value: s.Every})
		}
		if len(s.Tell) > 0 {
			m = append(m, yaml.MapItem{Key: "tell", Value: s.Tell})
		}
		if s.MadeBy != "" {
			m = append(m, yaml.MapItem{Key: "made_by", Value: s.MadeBy})
		}
		list = append(list, m)
	}
	body, err := yaml.MarshalWithOptions(yaml.MapSlice{{Key: "watch", Value: list}}, yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("write rules: %w", err)
	}
	return append([]byte(RulesFileHeader), body...), nil
}

// ParseRuleTime reads a rule's time as ParseWhen; a relative one is reread at each evaluation.
func ParseRuleTime(s string, now time.Time) (time.Time, error) { return domain.ParseWhen(s, now) }

func badFloat(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// limit is a rule's threshold: its key, its value (nil: not set) and what a value not above 0 is told.
type limit struct {
	key  string
	v    *float64
	want string
}

// oneLimit checks that exactly one of a and b is set, above 0; want says what a missing one is, both ends the both-set error.
func oneLimit(a, b limit, want, both string) error {
	switch {
	case a.v == nil && b.v == nil:
		return ruleErr("", "%s or %s: missing; want %s", a.key, b.key, want)
	case a.v != nil && b.v != nil:
		return ruleErr(b.key, "%s and %s are both set; want one of them%s", a.key, b.key, both)
	}
	for _, l := range []limit{a, b} {
		if l.v != nil && (badFloat(*l.v) || *l.v <= 0) {
			return ruleErr(l.key, "%v%s", *l.v, l.want)
		}
	}
	return nil
}
