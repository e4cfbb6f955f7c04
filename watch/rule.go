package watch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

// Where a rule comes from.
const (
	// FromConfig: the config file's `watch:` list; read-only here.
	FromConfig = "config"
	// FromRulesFile: the data dir's rules file, where the TUI saves the
	// rules it makes; the TUI may delete them.
	FromRulesFile = "rules file"
)

// Rule is a checked rule as the evaluator runs it.
type Rule struct {
	config.WatchRule
	// Kind is one of config.RuleKinds.
	Kind string
	// From is FromConfig or FromRulesFile; File is that file.
	From, File string
	// Index is the rule's place in its file's list (watch[Index]).
	Index    int
	Cooldown time.Duration
	// Every is how often a block or plan rule is evaluated.
	Every time.Duration
	// Tell is where its alerts go.
	Tell []string
	// Fingerprint changes when the condition does: the state of a rule
	// whose condition was edited starts afresh (its crossing, not its
	// name, is what was told).
	Fingerprint string
}

// Compile makes a rule of a config rule that Validate accepted, with the
// notifiers of n.
func Compile(w config.WatchRule, n config.Notify) Rule {
	r := Rule{WatchRule: w, Kind: w.Kind(), Cooldown: w.CooldownOrDefault(), Every: w.EveryOrDefault(), Tell: w.Tells(n)}
	cond := struct {
		Kind     string
		Block    *config.BlockRule
		Spot     *config.SpotRule
		Bucket   *config.BucketRule
		Plan     *config.PlanRule
		StartsIn *config.StartsInRule
		Idle     *config.IdleRule `json:",omitempty"`
	}{r.Kind, w.Block, w.Spot, w.Bucket, w.Plan, w.StartsIn, w.Idle}
	b, _ := json.Marshal(cond)
	sum := sha256.Sum256(b)
	r.Fingerprint = hex.EncodeToString(sum[:8])
	return r
}

// Key names the rule's place for messages: "watch[2]".
func (r Rule) Key() string { return fmt.Sprintf("watch[%d]", r.Index) }

// Describe says the rule's condition in a few words, for the Alerts view
// and the logs.
func (r Rule) Describe() string {
	switch r.Kind {
	case config.RuleBlock:
		b := r.Block
		size := fmt.Sprintf("%g %s", float64(b.GPUs), b.GPU)
		if b.Instances > 0 {
			size = fmt.Sprintf("%d instances of %s", b.Instances, b.GPU)
		}
		s := fmt.Sprintf("block ≥%s × %gh", size, b.Hours)
		if b.StartAfter != "" || b.StartBefore != "" {
			s += fmt.Sprintf(" starting %s…%s", orStr(b.StartAfter, "now"), orStr(b.StartBefore, "as sold"))
		}
		if b.MaxUSDGPUHour != nil {
			s += fmt.Sprintf(" under $%g/GPU-h", *b.MaxUSDGPUHour)
		}
		return s
	case config.RuleSpot:
		s := r.Spot
		if s.BelowUSDHour != nil {
			return fmt.Sprintf("spot %s %s below $%g/h", s.InstanceType, poolWhere(s.Region, s.Zone, s.Provider), *s.BelowUSDHour)
		}
		return fmt.Sprintf("spot %s %s above $%g/h", s.InstanceType, poolWhere(s.Region, s.Zone, s.Provider), *s.AboveUSDHour)
	case config.RuleBucket:
		b := r.Bucket
		s := fmt.Sprintf("interruption bucket of %s %s rises", b.InstanceType, poolWhere(b.Region, b.Zone, b.Provider))
		if b.AtLeast != "" {
			s += " to " + b.AtLeast + " or worse"
		}
		return s
	case config.RulePlan:
		p := r.Plan
		fig := ""
		if p.BelowUSD != nil {
			fig = fmt.Sprintf("$%g", *p.BelowUSD)
		} else {
			fig = fmt.Sprintf("$%g/useful GPU-h", *p.BelowUSDGPUHour)
		}
		return fmt.Sprintf("plan %d %s × %gh by %s, %g%% on time, under %s", p.GPUs, p.GPU, p.Hours, p.Deadline, p.OnTimeOrDefault(), fig)
	case config.RuleStartsIn:
		s := r.StartsIn
		what := "a booked block or reservation, or a scheduled fleet,"
		if s.Kind != "" {
			what = "a booked " + s.Kind
		}
		if s.ID != "" {
			what = "ledger row " + s.ID
		}
		return fmt.Sprintf("%s starts within %s", what, domain.FormatDuration(s.Within.D()))
	case config.RuleIdle:
		i := r.Idle
		what := "a running fleet, block or reservation"
		if i.Kind != "" {
			what = "a running " + i.Kind
		}
		if i.ID != "" {
			what = "ledger row " + i.ID
		}
		return fmt.Sprintf("%s idle more than %g%% of its cost (after %s running)", what, i.AbovePct, domain.FormatDuration(i.AfterOrDefault()))
	}
	return r.Kind
}

func poolWhere(region, zone, provider string) string {
	s := "in " + region
	if zone != "" {
		s = "in " + zone
		if !strings.HasPrefix(zone, region) {
			s = "in " + region + "/" + zone
		}
	} else {
		s += " (any zone)"
	}
	if provider != "" {
		s += " at " + provider
	}
	return s
}

func orStr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// CheckError is a rule the providers in use cannot serve: Key names the
// rule's key ("spot.region", relative to the rule), Msg what is wrong
// and what is accepted.
type CheckError struct {
	Key string
	Msg string
}

func (e *CheckError) Error() string { return e.Key + ": " + e.Msg }

func checkErr(key, format string, args ...any) error {
	return &CheckError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Check asks the descriptors of the providers in use whether they can
// serve the rule: a region none of them knows, a provider not in use, a
// block length none of them sells, a plan rule with no planner. Config's
// Validate checked the rest.
func Check(w config.WatchRule, descs []domain.Descriptor, havePlanner bool) error {
	names := make([]string, len(descs))
	for i, d := range descs {
		names[i] = d.Name
	}
	inUse := strings.Join(names, ", ")
	pool := func(section, region, provider string) error {
		ds := descs
		if provider != "" {
			ds = nil
			for _, d := range descs {
				if d.Name == provider {
					ds = append(ds, d)
				}
			}
			if len(ds) == 0 {
				return checkErr(section+".provider", "%s is not in use in this run (providers: %s); want one of them, or none", provider, inUse)
			}
		}
		for _, d := range ds {
			if d.KnowsRegion(region) {
				return nil
			}
		}
		return checkErr(section+".region", "%s is a region none of the providers in use (%s) knows; want one such as %s", region, inUse, regionExamples(ds))
	}
	switch w.Kind() {
	case config.RuleSpot:
		return pool("spot", w.Spot.Region, w.Spot.Provider)
	case config.RuleBucket:
		return pool("bucket", w.Bucket.Region, w.Bucket.Provider)
	case config.RuleBlock:
		b := w.Block
		var sellers []domain.Descriptor
		for _, d := range descs {
			if len(d.Sells) > 0 {
				sellers = append(sellers, d)
			}
		}
		if len(sellers) == 0 {
			return checkErr("block", "none of the providers in use (%s) sells capacity blocks or reservations; want a run with one that does (sim, aws, azure)", inUse)
		}
		d := time.Duration(b.Hours) * time.Hour
		var forms []string
		sold := false
		for _, s := range sellers {
			for _, t := range s.Sells {
				if t.ValidDuration(d) == nil {
					sold = true
				}
				forms = append(forms, s.Name+" "+t.Name+"s: "+t.DurationForm)
			}
		}
		if !sold {
			return checkErr("block.hours", "%g hours is a length none of the providers in use sells; want %s", b.Hours, strings.Join(forms, "; "))
		}
		for i, r := range b.Regions {
			known := false
			for _, s := range sellers {
				known = known || s.KnowsRegion(r)
			}
			if !known {
				return checkErr(fmt.Sprintf("block.regions[%d]", i), "%s is a region none of the providers that sell blocks (%s) knows; want one such as %s", r, inUse, regionExamples(sellers))
			}
		}
	case config.RulePlan:
		if !havePlanner {
			return checkErr("plan", "plan rules need the planner, which this build of gpumarket does not have yet; remove the rule or watch the blocks it would use with a block rule")
		}
	}
	return nil
}

func regionExamples(ds []domain.Descriptor) string {
	var ex []string
	for _, d := range ds {
		if d.RegionExample != "" && !slices.Contains(ex, d.RegionExample) {
			ex = append(ex, d.RegionExample)
		}
	}
	if len(ex) == 0 {
		return "us-east-1"
	}
	return strings.Join(ex, " or ")
}
