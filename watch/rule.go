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

// CheckError is a rule the providers in use cannot serve, at its key ("spot.region").
type CheckError struct {
	Key string
	Msg string
}

func (e *CheckError) Error() string { return e.Key + ": " + e.Msg }

func checkErr(key, format string, args ...any) error {
	return &CheckError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Check asks the providers' descriptors whether they can serve the rule.
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

// Place puts a Check error at its file:line:col: bad usage.
func Place(file string, s Spec, index int, err error) error {
	var ce *CheckError
	if !errors.As(err, &ce) {
		return err
	}
	key := fmt.Sprintf("watch[%d]", index)
	return placed(file, s, key, &config.KeyError{Key: key + "." + ce.Key, Msg: ce.Msg})
}
