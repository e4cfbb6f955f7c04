package watch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	Spec
	// Kind is one of KindNames.
	Kind string
	// From is FromConfig or FromRulesFile; File is that file.
	From, File string
	// Index is the rule's place in its file's list (watch[Index]).
	Index    int
	Cooldown time.Duration
	// Every is how often a rule on a schedule is evaluated.
	Every time.Duration
	// Tell is where its alerts go.
	Tell []string
	// Fingerprint changes when the condition does: the state of a rule
	// whose condition was edited starts afresh (its crossing, not its
	// name, is what was told).
	Fingerprint string
}

// Compile makes a rule of a spec that Validate accepted, with the
// notifiers of n.
func Compile(s Spec, n config.Notify) Rule {
	kind := s.Kind()
	return Rule{Spec: s, Kind: kind, Cooldown: s.CooldownOrDefault(), Every: s.EveryOrDefault(), Tell: s.TellsOf(n),
		Fingerprint: fingerprint(kind, s.Cond)}
}

// legacySlots are the kinds whose conditions the first builds
// fingerprinted side by side.
var legacySlots = []string{"Block", "Spot", "Bucket", "Plan", "StartsIn"}

// fingerprint hashes the condition's JSON in the shape the first builds
// wrote, so that a rule's state they kept still matches it.
func fingerprint(kind string, c Condition) string {
	body, _ := json.Marshal(c)
	own := ""
	for _, part := range strings.Split(kind, "_") {
		own += strings.ToUpper(part[:1]) + part[1:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"Kind":%q`, kind)
	for _, slot := range legacySlots {
		v := "null"
		if slot == own {
			v = string(body)
		}
		fmt.Fprintf(&b, `,%q:%s`, slot, v)
	}
	if !slices.Contains(legacySlots, own) {
		fmt.Fprintf(&b, `,%q:%s`, own, body)
	}
	b.WriteString("}")
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Key names the rule's place for messages: "watch[2]".
func (r Rule) Key() string { return fmt.Sprintf("watch[%d]", r.Index) }

// Describe says the rule's condition in a few words, for the Alerts view
// and the logs.
func (r Rule) Describe() string {
	if r.Cond == nil {
		return r.Kind
	}
	return r.Cond.Describe()
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
// block length none of them sells. Validate checked the rest.
func Check(s Spec, inUse []domain.Descriptor) error {
	c, ok := s.Cond.(checker)
	if !ok {
		return nil
	}
	err := c.check(inUse)
	var ce *CheckError
	if errors.As(err, &ce) {
		key := s.Kind()
		if ce.Key != "" {
			key += "." + ce.Key
		}
		return &CheckError{Key: key, Msg: ce.Msg}
	}
	return err
}

// Place puts a Check error of the rule at index of file at its
// file:line:col, as a *config.FileError (bad usage); other errors pass
// unchanged.
func Place(file string, s Spec, index int, err error) error {
	var ce *CheckError
	if !errors.As(err, &ce) {
		return err
	}
	ke := &config.KeyError{Key: fmt.Sprintf("watch[%d].%s", index, ce.Key), Msg: ce.Msg}
	line, col := s.At(ce.Key)
	return &config.FileError{Path: file, Line: line, Col: col, Err: ke}
}
