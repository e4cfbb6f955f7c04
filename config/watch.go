package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gpumarket/gpumarket/domain"
)

// The kinds of watch rule: what a rule of `watch:` waits for.
const (
	// RuleBlock: a capacity block (or fixed-window reservation) of at
	// least so many GPUs of a model, for so many hours, starting in a
	// range, under a price per GPU-hour, is on sale.
	RuleBlock = "block"
	// RuleSpot: a pool's spot price crosses below (or above) a figure.
	RuleSpot = "spot"
	// RuleBucket: a pool's interruption bucket rises.
	RuleBucket = "bucket"
	// RulePlan: the best on-time plan for a job gets cheaper than a
	// figure.
	RulePlan = "plan"
	// RuleStartsIn: a booked block or reservation, or a scheduled
	// fleet, starts within a duration.
	RuleStartsIn = "starts_in"
	// RuleIdle: a running fleet's (or block's, reservation's) idle
	// share — the part of its cost so far paid for GPU-hours not running
	// or not busy — passes a figure.
	RuleIdle = "idle"
)

// RuleKinds lists the rule kinds, for messages.
var RuleKinds = []string{RuleBlock, RuleSpot, RuleBucket, RulePlan, RuleStartsIn, RuleIdle}

// Where a rule's alerts are told (a rule's `tell:`).
const (
	// TellTUI: the header badge, the Alerts view's list and the terminal
	// bell, in every TUI session of a process that evaluates the rule.
	TellTUI = "tui"
	// TellCommand: notify.command.
	TellCommand = "command"
	// TellWebhook: notify.webhook.
	TellWebhook = "webhook"
)

// Tells lists what `tell:` accepts.
var Tells = []string{TellTUI, TellCommand, TellWebhook}

// Defaults and limits of the watch: and notify: sections.
const (
	// DefaultCooldown is the least time between two alerts of one rule
	// when the rule sets no cooldown, for every kind but starts_in.
	DefaultCooldown = time.Hour
	// DefaultEvery is how often a block or plan rule is evaluated when
	// it sets no `every:`: a block search asks every region of every
	// cloud, so it runs on its own timer, never on each market tick.
	DefaultEvery = 10 * time.Minute
	// MinEvery is the shortest `every:` accepted.
	MinEvery = time.Minute
	// MaxCooldown bounds a cooldown.
	MaxCooldown = 30 * 24 * time.Hour
	// DefaultOnTimePct is a plan rule's on_time_pct when it sets none.
	DefaultOnTimePct = 95.0
	// DefaultCheckpoint is a plan rule's checkpoint when it sets none.
	DefaultCheckpoint = 15 * time.Minute
	// DefaultIdleAfter is how long a row runs before an idle rule judges
	// it, when the rule sets no `after:`: instances booting and a job
	// loading its data are idle, and an alert for them is noise.
	DefaultIdleAfter = 30 * time.Minute
	// DefaultCommandTimeout bounds a notify command when
	// notify.command_timeout is not set; the command is killed then.
	DefaultCommandTimeout = 10 * time.Second
	// DefaultWebhookTimeout bounds one webhook POST.
	DefaultWebhookTimeout = 5 * time.Second
	// DefaultWebhookRetries is how many times a webhook POST is tried
	// again after a 5xx, a 429 or a timeout.
	DefaultWebhookRetries = 3
	// MaxWebhookRetries bounds webhook.retries.
	MaxWebhookRetries = 10
)

// RuleCooldown is a rule kind's cooldown when the rule sets none: an
// hour, but 0 for starts_in, which tells each booked row once, however
// close together two rows start.
func RuleCooldown(kind string) time.Duration {
	if kind == RuleStartsIn {
		return 0
	}
	return DefaultCooldown
}

// WatchRule is one rule of `watch:` (or of the data dir's rules file,
// where the TUI saves the rules it makes): a name, one condition, a
// cooldown and where to tell. Exactly one of the condition fields is set.
type WatchRule struct {
	Name     string        `yaml:"name"`
	Block    *BlockRule    `yaml:"block,omitempty"`
	Spot     *SpotRule     `yaml:"spot,omitempty"`
	Bucket   *BucketRule   `yaml:"bucket,omitempty"`
	Plan     *PlanRule     `yaml:"plan,omitempty"`
	StartsIn *StartsInRule `yaml:"starts_in,omitempty"`
	Idle     *IdleRule     `yaml:"idle,omitempty"`
	// Cooldown is the least time between two alerts of the rule; nil
	// means RuleCooldown of its kind.
	Cooldown *Duration `yaml:"cooldown,omitempty"`
	// Every is how often a block or plan rule is evaluated (default
	// DefaultEvery); the other kinds follow the market feed or the
	// ledger.
	Every Duration `yaml:"every,omitempty"`
	// Tell lists where its alerts go (Tells); empty means the TUI and
	// every notifier of `notify:`.
	Tell []string `yaml:"tell,omitempty"`
	// MadeBy is who made the rule in the TUI ("ssh:SHA256:… alice");
	// "" for a rule written by hand.
	MadeBy string `yaml:"made_by,omitempty"`

	// pos holds where each of the rule's keys is written ("spot.region"),
	// so that a check made above the config (does a provider know the
	// region?) points at the line as Validate's errors do.
	pos map[string]position
}

// BlockRule waits for a capacity block (or fixed-window reservation) on
// sale: at least GPUs GPUs (or Instances instances) of the GPU model for
// Hours hours, starting between StartAfter and StartBefore, at most
// MaxUSDGPUHour per GPU-hour.
type BlockRule struct {
	GPU       string `yaml:"gpu"`
	GPUs      int    `yaml:"gpus,omitempty"`
	Instances int    `yaml:"instances,omitempty"`
	// Hours is the block's length, whole hours.
	Hours float64 `yaml:"hours"`
	// StartAfter and StartBefore bound the start (RuleTimeForm); empty
	// means now and as far ahead as the clouds sell.
	StartAfter  string `yaml:"start_after,omitempty"`
	StartBefore string `yaml:"start_before,omitempty"`
	// MaxUSDGPUHour is the price per GPU-hour to be under; nil means any
	// price.
	MaxUSDGPUHour *float64 `yaml:"max_usd_gpu_hour,omitempty"`
	// Regions narrows the search; empty asks every region.
	Regions []string `yaml:"regions,omitempty"`
}

// SpotRule waits for a pool's spot price to cross below BelowUSDHour
// (or above AboveUSDHour), per instance-hour. Without a zone, any zone
// of the region counts: the cheapest for below, the dearest for above.
type SpotRule struct {
	InstanceType string   `yaml:"instance_type"`
	Region       string   `yaml:"region"`
	Zone         string   `yaml:"zone,omitempty"`
	Provider     string   `yaml:"provider,omitempty"`
	BelowUSDHour *float64 `yaml:"below_usd_hour,omitempty"`
	AboveUSDHour *float64 `yaml:"above_usd_hour,omitempty"`
}

// BucketRule waits for a pool's interruption bucket to rise (get worse):
// any rise, or one that reaches AtLeast. Without a zone, every zone of
// the region is watched.
type BucketRule struct {
	InstanceType string `yaml:"instance_type"`
	Region       string `yaml:"region"`
	Zone         string `yaml:"zone,omitempty"`
	Provider     string `yaml:"provider,omitempty"`
	// AtLeast is a bucket label ("15-20%"): only a rise to it or above
	// is told.
	AtLeast string `yaml:"at_least,omitempty"`
}

// PlanRule waits for the best plan for a job that is on time at least
// OnTimePct percent of the time to get cheaper than BelowUSD (expected
// total) or BelowUSDGPUHour (per useful GPU-hour).
type PlanRule struct {
	// GPU is the acceptable models, a comma list; the job's hours are
	// measured on the first.
	GPU   string  `yaml:"gpu"`
	GPUs  int     `yaml:"gpus"`
	Hours float64 `yaml:"hours"`
	// Start and Deadline are RuleTimeForm times.
	Start    string `yaml:"start"`
	Deadline string `yaml:"deadline"`
	// Checkpoint is the interval between checkpoints; 0s for a job that
	// cannot checkpoint; nil means DefaultCheckpoint.
	Checkpoint      *Duration `yaml:"checkpoint,omitempty"`
	OnTimePct       *float64  `yaml:"on_time_pct,omitempty"`
	BelowUSD        *float64  `yaml:"below_usd,omitempty"`
	BelowUSDGPUHour *float64  `yaml:"below_usd_gpu_hour,omitempty"`
}

// StartsInRule waits for a booked block or reservation, or a fleet
// scheduled to start later, of the ledger to start within Within. Kind and ID narrow it to one kind or one row.
type StartsInRule struct {
	Within Duration `yaml:"within"`
	Kind   string   `yaml:"kind,omitempty"`
	ID     string   `yaml:"id,omitempty"`
}

// IdleRule waits for a running row of the ledger (a fleet, a block or a
// reservation) to spend more than AbovePct percent of its cost so far on
// idle GPU-hours — not running or not busy, as the usage report counts
// them — once it has run After (default DefaultIdleAfter). Kind and ID
// narrow it to one kind or one row.
type IdleRule struct {
	AbovePct float64   `yaml:"above_pct"`
	After    *Duration `yaml:"after,omitempty"`
	Kind     string    `yaml:"kind,omitempty"`
	ID       string    `yaml:"id,omitempty"`
}

// AfterOrDefault is how long a row runs before the rule judges it.
func (i *IdleRule) AfterOrDefault() time.Duration {
	if i.After != nil {
		return i.After.D()
	}
	return DefaultIdleAfter
}

// Notify says where alerts go besides the TUI (`notify:`).
type Notify struct {
	// Command is run once per alert: the alert's text is its last
	// argument, the alert is JSON on its stdin and GPUMARKET_ALERT_*
	// variables in its environment.
	Command []string `yaml:"command,omitempty"`
	// CommandTimeout bounds the command (default DefaultCommandTimeout):
	// it is killed, with what it started, when the time is up.
	CommandTimeout Duration `yaml:"command_timeout,omitempty"`
	Webhook        *Webhook `yaml:"webhook,omitempty"`
}

// Webhook is a URL that each alert is POSTed to as JSON, with a
// Slack-compatible `text` field.
type Webhook struct {
	URL string `yaml:"url"`
	// Timeout bounds one POST (default DefaultWebhookTimeout).
	Timeout Duration `yaml:"timeout,omitempty"`
	// Retries is how many times a POST that met a 5xx, a 429 or a
	// timeout is tried again, with backoff (default
	// DefaultWebhookRetries).
	Retries *int `yaml:"retries,omitempty"`
}

// Kind returns the rule's kind, "" when it sets no condition.
func (r WatchRule) Kind() string {
	kinds := r.kinds()
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

func (r WatchRule) kinds() []string {
	var out []string
	for _, k := range []struct {
		set  bool
		name string
	}{{r.Block != nil, RuleBlock}, {r.Spot != nil, RuleSpot}, {r.Bucket != nil, RuleBucket}, {r.Plan != nil, RulePlan}, {r.StartsIn != nil, RuleStartsIn}, {r.Idle != nil, RuleIdle}} {
		if k.set {
			out = append(out, k.name)
		}
	}
	return out
}

// CooldownOrDefault is the rule's cooldown, or its kind's default.
func (r WatchRule) CooldownOrDefault() time.Duration {
	if r.Cooldown != nil {
		return r.Cooldown.D()
	}
	return RuleCooldown(r.Kind())
}

// EveryOrDefault is how often a block or plan rule is evaluated.
func (r WatchRule) EveryOrDefault() time.Duration {
	if r.Every > 0 {
		return r.Every.D()
	}
	return DefaultEvery
}

// Tells returns where the rule's alerts go: its `tell:`, or the TUI and
// every notifier n configures.
func (r WatchRule) Tells(n Notify) []string {
	if len(r.Tell) > 0 {
		return r.Tell
	}
	out := []string{TellTUI}
	if len(n.Command) > 0 {
		out = append(out, TellCommand)
	}
	if n.Webhook != nil {
		out = append(out, TellWebhook)
	}
	return out
}

// At returns where the rule's key ("spot.region", "" for the rule itself)
// is written in its file; 0, 0 when it is not known (a rule made in code).
func (r WatchRule) At(key string) (line, col int) {
	for k := key; ; {
		if p, ok := r.pos[k]; ok {
			return p.line, p.col
		}
		if k == "" {
			return 0, 0
		}
		// A key the file does not write (a missing field) is placed at
		// its section, or at the rule.
		if i := strings.LastIndexAny(k, ".["); i >= 0 {
			k = k[:i]
		} else {
			k = ""
		}
	}
}

// UnmarshalYAML decodes a rule and records where its keys are written.
func (r *WatchRule) UnmarshalYAML(node ast.Node) error {
	type plain WatchRule // without this method
	var p plain
	if err := yaml.NodeToValue(node, &p, yaml.DisallowUnknownField()); err != nil {
		return err
	}
	*r = WatchRule(p)
	r.pos = map[string]position{}
	record(r.pos, "", node)
	checkKeys(node, reflect.TypeFor[WatchRule](), "", r.pos) // errors were the decoder's to report
	return nil
}

// RuleTimeForm is what a rule's times accept.
const RuleTimeForm = "an RFC 3339 time (2026-12-03T11:30:00Z), a date (2026-12-03, midnight UTC) or a UTC date and time (2026-12-03 11:30)"

// ParseRuleTime reads a rule's time: RFC 3339, a date (midnight UTC) or
// "2026-12-03 11:30" (UTC: a rule is evaluated by a server whose zone is
// not its writer's).
func ParseRuleTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want %s", s, RuleTimeForm)
}

// RuleError is a bad rule of `watch:` or a bad `notify:` setting. It is
// bad usage (exit 2), like a bad flag; errors.As finds its KeyError too,
// which is how Parse places it at file:line:col.
type RuleError struct{ KeyError }

// Unwrap returns the KeyError.
func (e *RuleError) Unwrap() error { return &e.KeyError }

func ruleErr(key, format string, args ...any) error {
	return &RuleError{KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}}
}

// ruleNameRE is what a rule's name may be: it names the rule in logs,
// file names and environment variables.
var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// RuleNameForm is what a rule's name accepts.
const RuleNameForm = "1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit, such as h100-thursday"

// ValidRuleName reports whether s may name a rule.
func ValidRuleName(s string) bool { return ruleNameRE.MatchString(s) }

// validateWatch checks `notify:` and every rule of `watch:`.
func (c *Config) validateWatch() error {
	if err := c.Notify.validate(); err != nil {
		return err
	}
	return ValidateRules(c.Watch, "watch", c.Notify)
}

// ValidateRules checks rules written under key ("watch") with the
// notifiers of n, and writes their GPU models and instance types the
// catalog's way. A name may be used once.
func ValidateRules(rules []WatchRule, key string, n Notify) error {
	seen := map[string]bool{}
	for i := range rules {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := rules[i].validate(k, n); err != nil {
			return err
		}
		if seen[rules[i].Name] {
			return ruleErr(k+".name", "%q names another rule too; want a name of its own", rules[i].Name)
		}
		seen[rules[i].Name] = true
	}
	return nil
}

// Validate checks one rule on its own (a rule made in the TUI), with key
// naming it in errors.
func (r *WatchRule) Validate(key string, n Notify) error { return r.validate(key, n) }

func (r *WatchRule) validate(key string, n Notify) error {
	if r.Name == "" {
		return ruleErr(key, "name: missing; want a name: %s", RuleNameForm)
	}
	if !ValidRuleName(r.Name) {
		return ruleErr(key+".name", "%q: want %s", r.Name, RuleNameForm)
	}
	switch kinds := r.kinds(); len(kinds) {
	case 0:
		return ruleErr(key, "rule %q has no condition; want one of %s", r.Name, strings.Join(RuleKinds, ", "))
	case 1:
	default:
		return ruleErr(key+"."+kinds[1], "rule %q has conditions %s; want one condition per rule (make one rule for each)", r.Name, strings.Join(kinds, " and "))
	}
	kind := r.Kind()
	if r.Cooldown != nil && (r.Cooldown.D() < 0 || r.Cooldown.D() > MaxCooldown) {
		return ruleErr(key+".cooldown", "%s; want a duration from 0s to 720h such as 1h (default %s)", r.Cooldown.D(), RuleCooldown(kind))
	}
	if r.Every != 0 {
		if kind != RuleBlock && kind != RulePlan {
			follows := map[string]string{RuleStartsIn: "ledger", RuleIdle: "usage report"}[kind]
			if follows == "" {
				follows = "market feed"
			}
			return ruleErr(key+".every", "applies to block and plan rules; a %s rule follows the %s", kind, follows)
		}
		if r.Every.D() < MinEvery || r.Every.D() > 24*time.Hour {
			return ruleErr(key+".every", "%s; want a duration from 1m to 24h such as 10m (a block search asks every region of every cloud)", r.Every.D())
		}
	}
	for i, t := range r.Tell {
		k := fmt.Sprintf("%s.tell[%d]", key, i)
		switch {
		case !slices.Contains(Tells, t):
			return ruleErr(k, "unknown %q; want one of %s", t, strings.Join(Tells, ", "))
		case t == TellCommand && len(n.Command) == 0:
			return ruleErr(k, "command: notify.command is not set; set it, or tell %s", strings.Join(n.configured(), ", "))
		case t == TellWebhook && n.Webhook == nil:
			return ruleErr(k, "webhook: notify.webhook is not set; set it, or tell %s", strings.Join(n.configured(), ", "))
		case slices.Contains(r.Tell[:i], t):
			return ruleErr(k, "%s is named twice", t)
		}
	}
	switch kind {
	case RuleBlock:
		return r.Block.validate(key + ".block")
	case RuleSpot:
		return r.Spot.validate(key + ".spot")
	case RuleBucket:
		return r.Bucket.validate(key + ".bucket")
	case RulePlan:
		return r.Plan.validate(key + ".plan")
	case RuleIdle:
		return r.Idle.validate(key + ".idle")
	default:
		return r.StartsIn.validate(key + ".starts_in")
	}
}

// Blocks hold at most 64 instances of at most 8 GPUs, and last at most
// 26 weeks (domain.CapacityBlockTerms).
const (
	maxBlockGPUs  = 512
	maxBlockHours = 4368
)

func (b *BlockRule) validate(key string) error {
	if b.GPU == "" {
		return ruleErr(key, "gpu: missing; want one GPU model, one of %s", strings.Join(domain.GPUModels, ", "))
	}
	g, ok := CanonicalGPU(b.GPU)
	if !ok {
		return ruleErr(key+".gpu", "unknown GPU %q; want one of %s", b.GPU, strings.Join(domain.GPUModels, ", "))
	}
	b.GPU = g
	most := domain.CapacityBlockTerms.MaxInstances
	switch {
	case b.GPUs != 0 && b.Instances != 0:
		return ruleErr(key+".instances", "gpus and instances are both set; want one of them")
	case b.GPUs == 0 && b.Instances == 0:
		return ruleErr(key, "gpus: missing; want the number of GPUs, 1 to %d (or instances, 1 to %d)", maxBlockGPUs, most)
	case b.GPUs < 0 || b.GPUs > maxBlockGPUs:
		return ruleErr(key+".gpus", "%d; want a whole number of GPUs from 1 to %d (a block holds at most %d instances)", b.GPUs, maxBlockGPUs, most)
	case b.Instances < 0 || b.Instances > most:
		return ruleErr(key+".instances", "%d; want a whole number of instances from 1 to %d", b.Instances, most)
	}
	if b.Hours == 0 {
		return ruleErr(key, "hours: missing; want the block's length in whole hours, 1 to %d (AWS blocks: %s)", maxBlockHours, domain.CapacityBlockTerms.DurationForm)
	}
	if badFloat(b.Hours) || b.Hours != math.Trunc(b.Hours) || b.Hours < 1 || b.Hours > maxBlockHours {
		return ruleErr(key+".hours", "%v; want whole hours from 1 to %d (AWS blocks: %s)", b.Hours, maxBlockHours, domain.CapacityBlockTerms.DurationForm)
	}
	after, before, err := b.Window()
	if err != nil {
		return err.(*RuleError).under(key)
	}
	if !after.IsZero() && !before.IsZero() && !before.After(after) {
		return ruleErr(key+".start_before", "%s is not after start_after %s, so no block could start between them; want a later start_before",
			before.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339))
	}
	if b.MaxUSDGPUHour != nil && (badFloat(*b.MaxUSDGPUHour) || *b.MaxUSDGPUHour <= 0) {
		return ruleErr(key+".max_usd_gpu_hour", "%v: no block costs that little; want a price per GPU-hour above 0 such as 6", *b.MaxUSDGPUHour)
	}
	for i, r := range b.Regions {
		if !ValidRegion(r) {
			return ruleErr(fmt.Sprintf("%s.regions[%d]", key, i), "bad region %q; want %s", r, RegionForm)
		}
	}
	return nil
}

// Window returns the rule's start range; a bound not set is zero.
func (b *BlockRule) Window() (after, before time.Time, err error) {
	if b.StartAfter != "" {
		if after, err = ParseRuleTime(b.StartAfter); err != nil {
			return after, before, ruleErr("start_after", "%v", err)
		}
	}
	if b.StartBefore != "" {
		if before, err = ParseRuleTime(b.StartBefore); err != nil {
			return after, before, ruleErr("start_before", "%v", err)
		}
	}
	return after, before, nil
}

// under moves a RuleError of a relative key under key.
func (e *RuleError) under(key string) error {
	if e.Key == "" {
		e.Key = key
	} else {
		e.Key = key + "." + e.Key
	}
	return e
}

// validatePool checks a rule's pool: its instance type, region, zone and
// provider.
func validatePool(key string, it, region, zone, provider *string) error {
	if *it == "" {
		return ruleErr(key, "instance_type: missing; want a GPU instance type or VM size such as p5.48xlarge or Standard_ND96isr_H100_v5")
	}
	e, ok := domain.LookupGPU(*it)
	if !ok {
		return ruleErr(key+".instance_type", "%q is no GPU instance type or VM size gpumarket knows; want one such as p5.48xlarge, g6e.xlarge or Standard_ND96isr_H100_v5 (see `gpumarket prices`)", *it)
	}
	*it = e.InstanceType
	if *region == "" {
		return ruleErr(key, "region: missing; want a region such as us-west-2 or eastus")
	}
	if !ValidRegion(*region) {
		return ruleErr(key+".region", "bad region %q; want %s", *region, RegionForm)
	}
	// A zone is its region's name and a letter (AWS) or a digit (Azure).
	if z := *zone; z != "" && !(strings.HasPrefix(z, *region) && len(z) == len(*region)+1) && !(len(z) == 1 && z[0] >= '1' && z[0] <= '9') {
		return ruleErr(key+".zone", "%q is not a zone of %s; want one such as %sa (AWS) or 1, 2, 3 (Azure), or no zone for any zone of the region", z, *region, *region)
	}
	if *provider != "" && !slices.Contains(ProviderNames, *provider) {
		return ruleErr(key+".provider", "unknown provider %q; want one of %s, or none for any provider in use", *provider, strings.Join(ProviderNames, ", "))
	}
	return nil
}

func (s *SpotRule) validate(key string) error {
	if err := validatePool(key, &s.InstanceType, &s.Region, &s.Zone, &s.Provider); err != nil {
		return err
	}
	switch {
	case s.BelowUSDHour == nil && s.AboveUSDHour == nil:
		return ruleErr(key, "below_usd_hour or above_usd_hour: missing; want below_usd_hour or above_usd_hour, a spot price per instance-hour such as 20")
	case s.BelowUSDHour != nil && s.AboveUSDHour != nil:
		return ruleErr(key+".above_usd_hour", "below_usd_hour and above_usd_hour are both set; want one of them (make two rules to watch both)")
	case s.BelowUSDHour != nil && (badFloat(*s.BelowUSDHour) || *s.BelowUSDHour <= 0):
		return ruleErr(key+".below_usd_hour", "%v: no price is below it, so the rule could never fire; want a price per instance-hour above 0 such as 20", *s.BelowUSDHour)
	case s.AboveUSDHour != nil && (badFloat(*s.AboveUSDHour) || *s.AboveUSDHour <= 0):
		return ruleErr(key+".above_usd_hour", "%v; want a price per instance-hour above 0 such as 40", *s.AboveUSDHour)
	}
	return nil
}

func (b *BucketRule) validate(key string) error {
	if err := validatePool(key, &b.InstanceType, &b.Region, &b.Zone, &b.Provider); err != nil {
		return err
	}
	if b.AtLeast != "" {
		l, ok := domain.NormalizeBucket(b.AtLeast)
		if !ok {
			return ruleErr(key+".at_least", "unknown bucket %q; want one of %s", b.AtLeast, strings.Join(domain.Buckets, ", "))
		}
		if domain.BucketRank(l) == 0 {
			return ruleErr(key+".at_least", "%s is the calmest bucket: no rise ends there, so the rule could never fire; want one of %s", l, strings.Join(domain.Buckets[1:], ", "))
		}
		b.AtLeast = l
	}
	return nil
}

func (p *PlanRule) validate(key string) error {
	models := domain.SplitList(p.GPU)
	if len(models) == 0 {
		return ruleErr(key, "gpu: missing; want the GPU models the job can use, a comma list such as H100 or H100,H200 (one of %s)", strings.Join(domain.GPUModels, ", "))
	}
	for i, g := range models {
		m, ok := CanonicalGPU(g)
		if !ok {
			return ruleErr(key+".gpu", "unknown GPU %q; want a comma list of %s", g, strings.Join(domain.GPUModels, ", "))
		}
		if slices.Contains(models[:i], m) {
			return ruleErr(key+".gpu", "%s is named twice", m)
		}
		models[i] = m
	}
	p.GPU = strings.Join(models, ",")
	if p.GPUs == 0 {
		return ruleErr(key, "gpus: missing; want the GPUs the job needs at once, 1 to %d", maxBlockGPUs)
	}
	if p.Hours == 0 {
		return ruleErr(key, "hours: missing; want the job's hours of work, above 0, at most %d", maxBlockHours)
	}
	if p.GPUs < 1 || p.GPUs > maxBlockGPUs {
		return ruleErr(key+".gpus", "%d; want a whole number of GPUs from 1 to %d", p.GPUs, maxBlockGPUs)
	}
	if badFloat(p.Hours) || p.Hours <= 0 || p.Hours > maxBlockHours {
		return ruleErr(key+".hours", "%v; want hours of work above 0, at most %d (26 weeks)", p.Hours, maxBlockHours)
	}
	start, deadline, err := p.Window()
	if err != nil {
		return err.(*RuleError).under(key)
	}
	if earliest := start.Add(time.Duration(p.Hours * float64(time.Hour))); deadline.Before(earliest) {
		return ruleErr(key+".deadline", "%s is before start + hours (%s), so no plan could be on time; want a deadline at or after it",
			deadline.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339))
	}
	if p.Checkpoint != nil && p.Checkpoint.D() < 0 {
		return ruleErr(key+".checkpoint", "%s; want a duration such as 15m, or 0s for a job that cannot checkpoint", p.Checkpoint.D())
	}
	if p.OnTimePct != nil && (badFloat(*p.OnTimePct) || *p.OnTimePct <= 0 || *p.OnTimePct > 100) {
		return ruleErr(key+".on_time_pct", "%v; want a percentage above 0, at most 100 (default %g)", *p.OnTimePct, DefaultOnTimePct)
	}
	switch {
	case p.BelowUSD == nil && p.BelowUSDGPUHour == nil:
		return ruleErr(key, "below_usd or below_usd_gpu_hour: missing; want below_usd (the plan's expected total) or below_usd_gpu_hour (per useful GPU-hour)")
	case p.BelowUSD != nil && p.BelowUSDGPUHour != nil:
		return ruleErr(key+".below_usd_gpu_hour", "below_usd and below_usd_gpu_hour are both set; want one of them")
	case p.BelowUSD != nil && (badFloat(*p.BelowUSD) || *p.BelowUSD <= 0):
		return ruleErr(key+".below_usd", "%v: no plan costs less, so the rule could never fire; want a total above 0", *p.BelowUSD)
	case p.BelowUSDGPUHour != nil && (badFloat(*p.BelowUSDGPUHour) || *p.BelowUSDGPUHour <= 0):
		return ruleErr(key+".below_usd_gpu_hour", "%v: no plan costs less, so the rule could never fire; want a price per GPU-hour above 0", *p.BelowUSDGPUHour)
	}
	return nil
}

// Window returns the job's start and deadline.
func (p *PlanRule) Window() (start, deadline time.Time, err error) {
	if p.Start == "" {
		return start, deadline, ruleErr("", "start: missing; want the job's earliest start: %s", RuleTimeForm)
	}
	if start, err = ParseRuleTime(p.Start); err != nil {
		return start, deadline, ruleErr("start", "%v", err)
	}
	if p.Deadline == "" {
		return start, deadline, ruleErr("", "deadline: missing; want when the work must be done: %s", RuleTimeForm)
	}
	if deadline, err = ParseRuleTime(p.Deadline); err != nil {
		return start, deadline, ruleErr("deadline", "%v", err)
	}
	return start, deadline, nil
}

// Models returns the job's GPU models.
func (p *PlanRule) Models() []string { return domain.SplitList(p.GPU) }

// CheckpointOrDefault is the job's checkpoint interval.
func (p *PlanRule) CheckpointOrDefault() time.Duration {
	if p.Checkpoint != nil {
		return p.Checkpoint.D()
	}
	return DefaultCheckpoint
}

// OnTimeOrDefault is the share of runs the plan must be on time in.
func (p *PlanRule) OnTimeOrDefault() float64 {
	if p.OnTimePct != nil {
		return *p.OnTimePct
	}
	return DefaultOnTimePct
}

func (s *StartsInRule) validate(key string) error {
	if s.Within.D() <= 0 {
		return ruleErr(key, "within %s: nothing starts within it, so the rule could never fire; want a duration above 0 such as 1h", s.Within.D())
	}
	if s.Within.D() > domain.CapacityBlockTerms.MaxDuration {
		return ruleErr(key+".within", "%s; want a duration up to 4368h (26 weeks) such as 1h", s.Within.D())
	}
	if s.Kind != "" && s.Kind != domain.KindBlock && s.Kind != domain.KindReservation && s.Kind != domain.KindFleet {
		return ruleErr(key+".kind", "%q; want %s, %s or %s (a fleet scheduled with a start), or none for all three", s.Kind, domain.KindBlock, domain.KindReservation, domain.KindFleet)
	}
	return nil
}

func (i *IdleRule) validate(key string) error {
	switch {
	case badFloat(i.AbovePct) || i.AbovePct < 0:
		return ruleErr(key+".above_pct", "%v; want a percentage from 0 to 99 such as 40 (the share of a row's cost so far paid for idle GPU-hours)", i.AbovePct)
	case i.AbovePct >= 100:
		return ruleErr(key+".above_pct", "%v: no idle share is above it, so the rule could never fire; want a percentage from 0 to 99 such as 40", i.AbovePct)
	case i.After != nil && (i.After.D() < 0 || i.After.D() > 7*24*time.Hour):
		return ruleErr(key+".after", "%s; want a duration from 0s to 168h such as 30m (default %s)", i.After.D(), DefaultIdleAfter)
	case i.Kind != "" && i.Kind != domain.KindFleet && i.Kind != domain.KindBlock && i.Kind != domain.KindReservation:
		return ruleErr(key+".kind", "%q; want %s, %s or %s, or none for all three", i.Kind, domain.KindFleet, domain.KindBlock, domain.KindReservation)
	}
	return nil
}

// configured lists where alerts may be told with these notifiers.
func (n Notify) configured() []string {
	out := []string{TellTUI}
	if len(n.Command) > 0 {
		out = append(out, TellCommand)
	}
	if n.Webhook != nil {
		out = append(out, TellWebhook)
	}
	return out
}

// CommandTimeoutOrDefault bounds the notify command.
func (n Notify) CommandTimeoutOrDefault() time.Duration {
	if n.CommandTimeout > 0 {
		return n.CommandTimeout.D()
	}
	return DefaultCommandTimeout
}

// TimeoutOrDefault bounds one POST.
func (w Webhook) TimeoutOrDefault() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout.D()
	}
	return DefaultWebhookTimeout
}

// RetriesOrDefault is how many times a failed POST is tried again.
func (w Webhook) RetriesOrDefault() int {
	if w.Retries != nil {
		return *w.Retries
	}
	return DefaultWebhookRetries
}

func (n *Notify) validate() error {
	if len(n.Command) > 0 && strings.TrimSpace(n.Command[0]) == "" {
		return ruleErr("notify.command[0]", "empty; want the program to run first, such as [notify-send, gpumarket]")
	}
	if n.CommandTimeout != 0 && (n.CommandTimeout.D() < 0 || n.CommandTimeout.D() > 10*time.Minute) {
		return ruleErr("notify.command_timeout", "%s; want a duration above 0, at most 10m, such as 10s", n.CommandTimeout.D())
	}
	if w := n.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		if w.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ruleErr("notify.webhook.url", "bad URL %q; want an http:// or https:// URL such as a Slack incoming webhook's", redactURL(w.URL))
		}
		if w.Timeout != 0 && (w.Timeout.D() < 0 || w.Timeout.D() > 2*time.Minute) {
			return ruleErr("notify.webhook.timeout", "%s; want a duration above 0, at most 2m, such as 5s", w.Timeout.D())
		}
		if w.Retries != nil && (*w.Retries < 0 || *w.Retries > MaxWebhookRetries) {
			return ruleErr("notify.webhook.retries", "%d; want a whole number from 0 to %d", *w.Retries, MaxWebhookRetries)
		}
	}
	return nil
}

// redactURL keeps a webhook URL's scheme and host: its path is its
// secret (a Slack hook's is all it takes to post to the channel).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	}
	if u.Path == "" || u.Path == "/" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// RedactURL is a webhook URL as logs may say it: scheme and host.
func RedactURL(s string) string { return redactURL(s) }

func badFloat(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// RulesFile is the data dir's file of the rules made in the TUI: the same
// shape as the config's `watch:` list.
type RulesFile struct {
	Watch []WatchRule `yaml:"watch"`
}

// RulesFileHeader opens the rules file.
const RulesFileHeader = `# Watch rules made in gpumarket's TUI (key a). Same shape as the config's
# watch: list (see the README's Watch section); gpumarket rewrites this file
# when a rule is made or deleted in the TUI, and reads it again when it
# changes. Edit or delete rules here, or move them into the config.
`

// ParseRules reads a rules file's bytes: its errors are "file:line:col:
// key: what is wrong; want what is accepted", as Parse's are. Its rules
// may tell the notifiers of n.
func ParseRules(name string, data []byte, n Notify) ([]WatchRule, error) {
	pos := map[string]position{}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fileError(name, err)
	}
	var rf RulesFile
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, null := doc.Body.(*ast.NullNode); null {
			continue
		}
		if err := checkKeys(doc.Body, reflect.TypeFor[RulesFile](), "", pos); err != nil {
			return nil, fileError(name, err)
		}
		if err := yaml.NodeToValue(doc.Body, &rf, yaml.DisallowUnknownField()); err != nil {
			return nil, fileError(name, explain(err, pos))
		}
		break // one document: the file gpumarket writes
	}
	if err := ValidateRules(rf.Watch, "watch", n); err != nil {
		var ke *KeyError
		if errors.As(err, &ke) {
			if p, ok := pos[ke.Key]; ok {
				return nil, fmt.Errorf("%s:%d:%d: %w", name, p.line, p.col, err)
			}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rf.Watch, nil
}

// MarshalRules writes rules as ParseRules reads them, under the header.
func MarshalRules(rules []WatchRule) ([]byte, error) {
	if rules == nil {
		rules = []WatchRule{}
	}
	body, err := yaml.MarshalWithOptions(RulesFile{Watch: rules}, yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("write rules: %w", err)
	}
	return append([]byte(RulesFileHeader), body...), nil
}
