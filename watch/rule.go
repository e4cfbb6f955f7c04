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

// Where a rule comes from: the config (read-only here) or the TUI's rules file.
const (
	FromConfig    = "config"
	FromRulesFile = "rules file"
)

// Rule is a checked rule; Index is its place in File's list. An edited condition
// changes Fingerprint, so its state starts afresh.
type Rule struct {
	Spec
	Kind        string
	From, File  string
	Index       int
	Cooldown    time.Duration
	Every       time.Duration
	Tell        []string
	Fingerprint string
}

// Compile makes a rule of a valid spec, with the notifiers of n.
func Compile(s Spec, n config.Notify) Rule {
	kind := s.Kind()
	return Rule{Spec: s, Kind: kind, Cooldown: s.CooldownOrDefault(), Every: s.EveryOrDefault(), Tell: s.TellsOf(n),
		Fingerprint: fingerprint(kind, s.Cond)}
}

var legacySlots = []string{"Block", "Spot", "Bucket", "Plan", "StartsIn"}

// fingerprint hashes the condition's JSON in its first shape, so kept states still match.
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

// Key names the rule's place: "watch[2]".
func (r Rule) Key() string { return fmt.Sprintf("watch[%d]", r.Index) }

// Describe says the rule's condition in a few words.
func (r Rule) Describe() string {
	if r.Cond == nil {
		return r.Kind
	}
	return r.Cond.Describe()
}

// Check asks the providers' descriptors whether they can serve the rule; its
// error is a *config.KeyError at the rule's key ("spot.region").
func Check(s Spec, inUse []domain.Descriptor) error {
	if c, ok := s.Cond.(checker); ok {
		return under(s.Kind(), c.check(inUse))
	}
	return nil
}

// Place puts a Check error at its file:line:col: bad usage.
func Place(file string, s Spec, index int, err error) error {
	if !errors.As(err, new(*config.KeyError)) {
		return err
	}
	key := fmt.Sprintf("watch[%d]", index)
	return placed(file, s, key, under(key, err))
}
