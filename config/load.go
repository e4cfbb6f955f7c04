package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/gpumarket/gpumarket/domain"
)

// Environment variables gpumarket reads for its own settings.
const (
	EnvConfig         = "GPUMARKET_CONFIG"
	EnvDataDir        = "GPUMARKET_DATA_DIR"
	EnvAWSAdvisorURL  = "GPUMARKET_AWS_ADVISOR_URL"
	EnvAzurePricesURL = "GPUMARKET_AZURE_PRICES_URL"
	EnvSimSpeed       = "GPUMARKET_SIM_SPEED"
	EnvAzureSubID     = "AZURE_SUBSCRIPTION_ID"
	EnvAWSProfile     = "AWS_PROFILE"
)

// providerRE is a provider name's form; which exist is CheckProviders' to say.
var providerRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)

// ValidProviderName reports whether s has a provider name's shape.
func ValidProviderName(s string) bool { return providerRE.MatchString(s) }

// Roles are the values serve.roles accepts.
var Roles = []string{"viewer", "booker"}

// ConfigPath returns $GPUMARKET_CONFIG (explicit: it must exist), else config.yaml in
// $XDG_CONFIG_HOME/gpumarket (~/.config/gpumarket).
func ConfigPath() (path string, explicit bool, err error) {
	if p := os.Getenv(EnvConfig); p != "" {
		return p, true, nil
	}
	dir, err := xdgDir("config", EnvConfig, "XDG_CONFIG_HOME", ".config")
	if err != nil {
		return "", false, err
	}
	return filepath.Join(dir, "gpumarket", "config.yaml"), false, nil
}

// xdgDir is $xdg, else home's def; own is gpumarket's variable, named in the error.
func xdgDir(what, own, xdg, def string) (string, error) {
	if dir := os.Getenv(xdg); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the %s dir: set %s or %s: %w", what, own, xdg, err)
	}
	return filepath.Join(home, def), nil
}

// DataDir returns $GPUMARKET_DATA_DIR, else $XDG_DATA_HOME/gpumarket (~/.local/share),
// made 0700 when missing: the ledger says what the user bought.
func DataDir() (string, error) {
	dir := os.Getenv(EnvDataDir)
	if dir == "" {
		base, err := xdgDir("data", EnvDataDir, "XDG_DATA_HOME", filepath.Join(".local", "share"))
		if err != nil {
			return "", err
		}
		dir = filepath.Join(base, "gpumarket")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	return dir, nil
}

// MaxFileSize is the largest config file read: parsing takes ~20× its size in memory.
const MaxFileSize = 1 << 20

// FileError is a config file read but unusable: bad usage (exit 2), reading
// "file:line:col: key: what is wrong; want what is accepted".
type FileError struct {
	Path      string
	Line, Col int   // 0 when the error has no place
	Err       error // a *KeyError for a bad value
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %v", e.Path, e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Load returns Default(), then the file at path or ConfigPath() (a missing default file is
// no error), then the environment; the caller applies flags and then Validate.
func Load(path string) (Config, error) {
	explicit := path != ""
	if !explicit {
		p, exp, err := ConfigPath()
		if err != nil {
			return Config{}, err
		}
		path, explicit = p, exp
	}
	c := Default()
	data, err := readFile(path)
	if err == nil {
		c, err = Parse(path, data)
	} else if errors.Is(err, fs.ErrNotExist) && !explicit {
		err = nil // no file: the defaults
	}
	if err != nil {
		return Config{}, err
	}
	c.ApplyEnv(os.Getenv)
	return c, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // "open <path>: <why>"; the caller says it is the config
	}
	defer f.Close()
	tooBig := func(size string) error {
		return &FileError{Path: path, Err: fmt.Errorf("%s is larger than the %d MiB a config file may hold; want a config of a few KiB (see the README's Configuration)", size, MaxFileSize>>20)}
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileSize {
		return nil, tooBig(fmt.Sprintf("%d bytes", fi.Size()))
	}
	// A pipe or a growing file has no size to trust: read one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, tooBig(fmt.Sprintf("more than %d bytes", MaxFileSize))
	}
	return data, nil
}

// Parse reads a config file's bytes over Default() and validates them; errors are
// *FileError. A file of no settings (empty, comments, "---") is the defaults.
func Parse(name string, data []byte) (Config, error) {
	c := Default()
	c.Path = name
	if len(data) > MaxFileSize {
		return Config{}, &FileError{Path: name, Err: fmt.Errorf("%d bytes is larger than the %d MiB a config file may hold", len(data), MaxFileSize>>20)}
	}
	// Windows editors may write a byte-order mark, which YAML would read as a value.
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	pos := map[string]Pos{}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		fe := InFile(name, err).(*FileError)
		fe.Err = fmt.Errorf("%w; want YAML of key: value lines, lists as [a, b] (see the README's Configuration)", fe.Err)
		return Config{}, fe
	}
	// Decoding reads only the first document: refuse a second, not drop it silently.
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, null := doc.Body.(*ast.NullNode); null {
			continue
		}
		if body != nil {
			e := NodeError(doc.Body, "a second YAML document; want one document holding every setting (remove the --- line above it)").(*posError)
			e.col = 1 // the document, not its first token
			return Config{}, InFile(name, e)
		}
		body = doc.Body
	}
	if body == nil {
		// Nothing is set: the defaults hold (decoding nothing would zero every key).
		return c, nil
	}
	if err := checkKeys(body, reflect.TypeFor[Config](), "", pos); err != nil {
		return Config{}, InFile(name, err)
	}
	if err := yaml.NodeToValue(body, &c, yaml.DisallowUnknownField()); err != nil {
		return Config{}, InFile(name, explain(err, pos))
	}
	c.oldRisk(pos)
	c.Path = name
	for i := range c.Providers {
		c.providerAt = append(c.providerAt, pos[fmt.Sprintf("providers[%d]", i)])
	}
	if err := c.Validate(); err != nil {
		var ke *KeyError
		var p Pos // none when the key is not in the file
		if errors.As(err, &ke) {
			p = pos[ke.Key]
		}
		return Config{}, &FileError{Path: name, Line: p.Line, Col: p.Col, Err: err}
	}
	return c, nil
}

// CheckProviders refuses an unknown provider the file names, at its place in the file.
func (c Config) CheckProviders(known []string) error {
	for i, p := range c.Providers {
		if slices.Contains(known, p) {
			continue
		}
		err := keyErr(fmt.Sprintf("providers[%d]", i), "unknown provider %q; want one of %s", p, strings.Join(known, ", "))
		if i < len(c.providerAt) && c.providerAt[i].Line > 0 {
			return &FileError{Path: c.Path, Line: c.providerAt[i].Line, Col: c.providerAt[i].Col, Err: err}
		}
		return &FileError{Path: c.Path, Err: err}
	}
	return nil
}

// ApplyEnv lets the environment override the file.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := getenv(EnvAWSAdvisorURL); v != "" {
		c.AWS.AdvisorURL = v
	}
	if v := getenv(EnvAzurePricesURL); v != "" {
		c.Azure.PricesURL = v
	}
	// AZURE_SUBSCRIPTION_ID may name another subscription than gpumarket's: the file wins.
	if v := getenv(EnvAzureSubID); v != "" && c.Azure.SubscriptionID == "" {
		c.Azure.SubscriptionID = v
	}
	if v := getenv(EnvAWSProfile); v != "" {
		c.AWS.Profile = v
	}
	if v := strings.TrimSpace(getenv(EnvSimSpeed)); v != "" {
		c.Sim.speedEnv = v
		n, err := strconv.Atoi(v)
		if err != nil {
			n = 0 // refused by Validate, naming the variable
		}
		c.Sim.Speed = n
	}
}

// MaxSimSpeed is the fastest simulated clock: a day of market time per second.
const MaxSimSpeed = 86400

// KeyError is a bad value of one key, named as in the file ("providers[1]").
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

func keyErr(key, format string, args ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

var regionRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}[a-z0-9]$`)

// ValidRegion reports whether s has a region's shape; the provider says whether it exists.
func ValidRegion(s string) bool { return regionRE.MatchString(s) }

// RegionForm is the accepted form of a region, for error messages.
const RegionForm = "lower-case letters, digits and dashes, such as us-east-1 or eastus"

// Validate checks every value and normalises the GPU names; its error is a *KeyError.
func (c *Config) Validate() error {
	for i, p := range c.Providers {
		if !ValidProviderName(p) {
			return keyErr(fmt.Sprintf("providers[%d]", i), "bad provider %q; want a provider's name such as aws or gcp", p)
		}
	}
	for i, g := range c.GPUs {
		m, ok := domain.CanonicalGPU(g)
		if !ok {
			return keyErr(fmt.Sprintf("gpus[%d]", i), "unknown GPU %q; want one of %s", g, strings.Join(domain.GPUModels, ", "))
		}
		c.GPUs[i] = m
	}
	for i, r := range c.Regions {
		if !ValidRegion(r) {
			return keyErr(fmt.Sprintf("regions[%d]", i), "bad region %q; want %s", r, RegionForm)
		}
	}
	if c.Window.D() <= 0 || c.Window.D() > domain.MaxWindow {
		return keyErr("window", "%s is out of range; want %s", c.Window.D(), domain.WindowForm)
	}
	if c.Cache.Retention.D() <= 0 || c.Cache.Retention.D() > domain.MaxWindow {
		return keyErr("cache.retention", "%s is out of range; want %s", c.Cache.Retention.D(), domain.WindowForm)
	}
	if c.Refresh.D() < time.Second {
		return keyErr("refresh", "%s is too short; want at least 1s (the clouds rate-limit)", c.Refresh.D())
	}
	if c.Sim.Speed < 1 || c.Sim.Speed > MaxSimSpeed {
		key, v := "sim.speed", fmt.Sprint(c.Sim.Speed)
		if c.Sim.speedEnv != "" {
			key, v = EnvSimSpeed, fmt.Sprintf("%q", c.Sim.speedEnv)
		}
		return keyErr(key, "%s; want a whole number from 1 (the wall clock) to %d, such as 7200 (two hours a second)", v, MaxSimSpeed)
	}
	if c.Sim.Tick.D() < 100*time.Millisecond {
		return keyErr("sim.tick", "%s is too short; want at least 100ms", c.Sim.Tick.D())
	}
	if c.Risk.CheckpointInterval.D() <= 0 {
		return keyErr("risk.checkpoint_interval", "%s; want a positive duration such as 15m", c.Risk.CheckpointInterval.D())
	}
	if c.Risk.RestartOverhead.D() < 0 {
		return keyErr("risk.restart_overhead", "%s; want a duration of 0s or more such as 6m", c.Risk.RestartOverhead.D())
	}
	if err := c.Plan.validate(); err != nil {
		return err
	}
	if bad(c.Budget.MaxBookingUSD) {
		return keyErr("budget.max_booking_usd", "%v; want a number ≥ 0 (0 means no cap)", c.Budget.MaxBookingUSD)
	}
	if bad(c.Budget.MaxDailyUSD) {
		return keyErr("budget.max_daily_usd", "%v; want a number ≥ 0 (0 means no cap)", c.Budget.MaxDailyUSD)
	}
	if bad(c.Budget.MaxIdlePct) || c.Budget.MaxIdlePct > 100 {
		return keyErr("budget.max_idle_pct", "%v; want a percentage from 0 to 100 (0 means no alert)", c.Budget.MaxIdlePct)
	}
	for key, u := range map[string]string{"aws.advisor_url": c.AWS.AdvisorURL, "azure.prices_url": c.Azure.PricesURL} {
		if u != "" && !httpURL(u) {
			return keyErr(key, "bad URL %q; want an http:// or https:// URL", u)
		}
	}
	if err := c.validateGCP(); err != nil {
		return err
	}
	if c.Serve.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Serve.Listen); err != nil || port == "" {
			return keyErr("serve.listen", "bad address %q; want host:port such as 127.0.0.1:2222", c.Serve.Listen)
		}
	}
	if c.Serve.IdleTimeout.D() < 0 {
		return keyErr("serve.idle_timeout", "%s; want a duration of 0s or more (0 means none)", c.Serve.IdleTimeout.D())
	}
	if c.Serve.MaxSessions < 1 {
		return keyErr("serve.max_sessions", "%d; want a whole number ≥ 1", c.Serve.MaxSessions)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Serve.Roles)) {
		if !strings.HasPrefix(k, "SHA256:") {
			return keyErr("serve.roles."+k, "bad key fingerprint %q; want SHA256:… as ssh-keygen -lf prints it", k)
		}
		if v := c.Serve.Roles[k]; !slices.Contains(Roles, v) {
			return keyErr("serve.roles."+k, "unknown role %q; want one of %s", v, strings.Join(Roles, ", "))
		}
	}
	return c.Notify.validate()
}

func bad(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }

// httpURL reports whether u is an http or https URL with a host.
func httpURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// UnmarshalYAML reads a Go duration ("30s", "15m", "1h30m").
func (d *Duration) UnmarshalYAML(node ast.Node) error {
	return readDuration(node, d, "want a duration such as 30s or 15m", func(s string) (time.Duration, error) {
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q; want a number and a unit such as 30s, 15m or 1h30m", s)
		}
		return v, nil
	})
}

// MarshalYAML writes the duration as UnmarshalYAML reads it.
func (d Duration) MarshalYAML() ([]byte, error) { return []byte(d.D().String()), nil }

// UnmarshalYAML reads a window as domain.ParseWindow does ("24h", "7d").
func (w *Window) UnmarshalYAML(node ast.Node) error {
	return readDuration(node, w, "want a window: "+domain.WindowForm, domain.ParseWindow)
}

// MarshalYAML writes the window as UnmarshalYAML reads it.
func (w Window) MarshalYAML() ([]byte, error) { return []byte(domain.FormatWindow(w.D())), nil }

// readDuration reads a scalar with parse; null or "" leaves *d as it was.
func readDuration[T ~int64](node ast.Node, d *T, want string, parse func(string) (time.Duration, error)) error {
	s, ok := scalar(node)
	if !ok {
		return NodeError(node, "%s", want)
	}
	if s == "" {
		return nil
	}
	v, err := parse(s)
	if err != nil {
		return NodeError(node, "%v", err)
	}
	*d = T(v)
	return nil
}

func scalar(node ast.Node) (string, bool) {
	switch n := bare(node).(type) {
	case *ast.NullNode:
		return "", true
	case *ast.StringNode:
		return n.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.LiteralNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

// bare is node without the tags and anchors around its value.
func bare(node ast.Node) ast.Node {
	for {
		switch n := node.(type) {
		case *ast.TagNode:
			node = n.Value
		case *ast.AnchorNode:
			node = n.Value
		default:
			return node
		}
	}
}

type posError struct {
	line, col int
	msg       string
}

func (e *posError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

// NodeError is an error at node's place in its file.
func NodeError(node ast.Node, format string, args ...any) error {
	e := &posError{msg: fmt.Sprintf(format, args...)}
	if tk := node.GetToken(); tk != nil && tk.Position != nil {
		e.line, e.col = tk.Position.Line, tk.Position.Column
	}
	return e
}

// explain names a decoding error's key by its place and, for a wrong type, what it accepts.
func explain(err error, pos map[string]Pos) error {
	line, col := 0, 0
	var pe *posError
	var ye yaml.Error
	switch {
	case errors.As(err, &pe):
		line, col = pe.line, pe.col
	case errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil:
		line, col = ye.GetToken().Position.Line, ye.GetToken().Position.Column
	default:
		return err
	}
	key, best := "", 0
	for k, p := range pos {
		if p.Line == line && p.Col <= col && p.Col >= best {
			key, best = k, p.Col
		}
	}
	if key == "" {
		return err
	}
	if pe != nil {
		return &posError{line: line, col: col, msg: key + ": " + pe.msg}
	}
	var te *yaml.TypeError
	if t := pos[key].typ; errors.As(err, &te) && t != nil {
		return &posError{line: line, col: col, msg: fmt.Sprintf("%s: want %s", key, kindName(t))}
	}
	return &posError{line: line, col: col, msg: key + ": " + ye.GetMessage()}
}

// InFile is a *FileError of an error Decode or NodeError returned.
func InFile(name string, err error) error {
	var pe *posError
	if errors.As(err, &pe) {
		return &FileError{Path: name, Line: pe.line, Col: pe.col, Err: errors.New(pe.msg)}
	}
	var ye yaml.Error
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return &FileError{Path: name, Line: tk.Position.Line, Col: tk.Position.Column, Err: errors.New(ye.GetMessage())}
		}
		return &FileError{Path: name, Err: errors.New(ye.GetMessage())}
	}
	return &FileError{Path: name, Err: err}
}

// checkKeys walks the document against Config to name the keys accepted beside an unknown
// one (the decoder only says "unknown field"), recording each key's place for Validate.
func checkKeys(node ast.Node, typ reflect.Type, path string, pos map[string]Pos) error {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == rulesType {
		return nil // the watch package checks the rules
	}
	node = bare(node)
	switch n := node.(type) {
	case *ast.MappingValueNode:
		return checkMapping([]*ast.MappingValueNode{n}, node, typ, path, pos)
	case *ast.MappingNode:
		return checkMapping(n.Values, node, typ, path, pos)
	case *ast.SequenceNode:
		if typ.Kind() != reflect.Slice {
			return NodeError(node, "%s: want %s, not a list", orTop(path), kindName(typ))
		}
		for i, v := range n.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			record(pos, p, v, typ.Elem())
			if err := checkKeys(v, typ.Elem(), p, pos); err != nil {
				return err
			}
		}
		return nil
	case *ast.NullNode, *ast.AliasNode, *ast.CommentGroupNode:
		return nil
	}
	if typ.Kind() == reflect.Slice {
		return NodeError(node, "%s: want a list such as [a, b], not a single value", orTop(path))
	}
	if typ.Kind() == reflect.Struct && typ != reflect.TypeFor[time.Time]() {
		return NodeError(node, "%s: want a mapping of keys, not a value", orTop(path))
	}
	return nil
}

func checkMapping(values []*ast.MappingValueNode, node ast.Node, typ reflect.Type, path string, pos map[string]Pos) error {
	switch typ.Kind() {
	case reflect.Struct:
		fields := map[string]reflect.Type{}
		var names []string
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			fields[tag] = f.Type
			names = append(names, tag)
		}
		for _, mv := range values {
			if mv == nil || mv.Key == nil {
				continue
			}
			k := KeyText(mv.Key)
			if k == "<<" {
				continue // merge keys are checked by the decoder
			}
			ft, ok := fields[k]
			if !ok {
				return NodeError(mv.Key, "unknown key %q in %s; want one of %s", k, orTop(path), strings.Join(names, ", "))
			}
			p := join(path, k)
			record(pos, p, mv.Key, ft)
			if err := checkKeys(mv.Value, ft, p, pos); err != nil {
				return err
			}
		}
	case reflect.Map:
		for _, mv := range values {
			if mv == nil || mv.Key == nil {
				continue
			}
			p := join(path, KeyText(mv.Key))
			record(pos, p, mv.Key, typ.Elem())
			if err := checkKeys(mv.Value, typ.Elem(), p, pos); err != nil {
				return err
			}
		}
	default:
		return NodeError(node, "%s: want %s, not a mapping", orTop(path), kindName(typ))
	}
	return nil
}

// KeyText is a mapping key as written.
func KeyText(k ast.MapKeyNode) string {
	if s, ok := scalar(k); ok {
		return s
	}
	if tk := k.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

// PosOf is where node is written; false when its token has no place.
func PosOf(node ast.Node) (Pos, bool) {
	if tk := node.GetToken(); tk != nil && tk.Position != nil {
		return Pos{Line: tk.Position.Line, Col: tk.Position.Column}, true
	}
	return Pos{}, false
}

// Entries are a mapping's keys and values, under its tags and anchors.
func Entries(node ast.Node) ([]*ast.MappingValueNode, bool) {
	switch n := bare(node).(type) {
	case *ast.MappingNode:
		return n.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{n}, true
	}
	return nil, false
}

// record keeps where path is written and the Go type it decodes into.
func record(pos map[string]Pos, path string, node ast.Node, typ reflect.Type) {
	if p, ok := PosOf(node); ok {
		p.typ = typ
		pos[path] = p
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Int, reflect.Int64, reflect.Int32:
		if t == reflect.TypeFor[Duration]() || t == reflect.TypeFor[Window]() {
			return "a duration"
		}
		return "a whole number"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a value"
}

// EnvGCPProject is Google's own variable for the project.
const EnvGCPProject = "GOOGLE_CLOUD_PROJECT"

var gcpProjectRE = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$|^[a-z][-a-z0-9.:]{4,60}[a-z0-9]$`)

func (c *Config) validateGCP() error {
	g := c.GCP
	if g.Project == "" {
		g.Project = os.Getenv(EnvGCPProject)
	}
	if g.Project != "" && !gcpProjectRE.MatchString(g.Project) {
		return keyErr("gcp.project", "bad project id %q; want 6 to 30 lower-case letters, digits and dashes, such as my-project-123", g.Project)
	}
	for key, u := range map[string]string{"gcp.endpoints.compute": g.Endpoints.Compute, "gcp.endpoints.billing": g.Endpoints.Billing,
		"gcp.endpoints.monitoring": g.Endpoints.Monitoring} {
		if u != "" && !httpURL(u) {
			return keyErr(key, "bad URL %q; want an http:// or https:// base URL such as https://compute.googleapis.com/compute/v1/", u)
		}
	}
	if g.DiskGB < 0 || g.DiskGB > 65536 {
		return keyErr("gcp.disk_gb", "%d; want a boot disk size in GB from 10 to 65536 (0: 200)", g.DiskGB)
	}
	return nil
}

// Rules is the `watch:` list as written, for watch.ConfigRules to read.
type Rules []ast.Node

func (r *Rules) UnmarshalYAML(node ast.Node) error {
	switch n := bare(node).(type) {
	case *ast.NullNode:
		*r = nil
		return nil
	case *ast.SequenceNode:
		*r = append(Rules(nil), n.Values...)
		return nil
	}
	return NodeError(bare(node), "want a list of rules such as [{name: cheap-p5, spot: {…}}]")
}

var rulesType = reflect.TypeFor[Rules]()

// Defaults and limits of `notify:`.
const (
	DefaultCommandTimeout = 10 * time.Second
	DefaultWebhookTimeout = 5 * time.Second // one POST
	DefaultWebhookRetries = 3
	MaxWebhookRetries     = 10
)

// Notify says where alerts go besides the TUI (`notify:`): a command, a webhook.
type Notify struct {
	Command        []string `yaml:"command,omitempty"`
	CommandTimeout Duration `yaml:"command_timeout,omitempty"`
	Webhook        *Webhook `yaml:"webhook,omitempty"`
}

// Webhook is notify.webhook.
type Webhook struct {
	URL     string   `yaml:"url"`
	Timeout Duration `yaml:"timeout,omitempty"`
	Retries *int     `yaml:"retries,omitempty"`
}

func (n Notify) CommandTimeoutOrDefault() time.Duration {
	if n.CommandTimeout > 0 {
		return n.CommandTimeout.D()
	}
	return DefaultCommandTimeout
}

func (w Webhook) TimeoutOrDefault() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout.D()
	}
	return DefaultWebhookTimeout
}

func (w Webhook) RetriesOrDefault() int {
	if w.Retries != nil {
		return *w.Retries
	}
	return DefaultWebhookRetries
}

func (n *Notify) validate() error {
	if len(n.Command) > 0 && strings.TrimSpace(n.Command[0]) == "" {
		return keyErr("notify.command[0]", "empty; want the program to run first, such as [notify-send, gpumarket]")
	}
	if n.CommandTimeout != 0 && (n.CommandTimeout.D() < 0 || n.CommandTimeout.D() > 10*time.Minute) {
		return keyErr("notify.command_timeout", "%s; want a duration above 0, at most 10m, such as 10s", n.CommandTimeout.D())
	}
	if w := n.Webhook; w != nil {
		if !httpURL(w.URL) {
			return keyErr("notify.webhook.url", "bad URL %q; want an http:// or https:// URL such as a Slack incoming webhook's", RedactURL(w.URL))
		}
		if w.Timeout != 0 && (w.Timeout.D() < 0 || w.Timeout.D() > 2*time.Minute) {
			return keyErr("notify.webhook.timeout", "%s; want a duration above 0, at most 2m, such as 5s", w.Timeout.D())
		}
		if w.Retries != nil && (*w.Retries < 0 || *w.Retries > MaxWebhookRetries) {
			return keyErr("notify.webhook.retries", "%d; want a whole number from 0 to %d", *w.Retries, MaxWebhookRetries)
		}
	}
	return nil
}

// RedactURL keeps a webhook URL's scheme and host: its path is its secret.
func RedactURL(s string) string {
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

// Pos is where a key is written in its file.
type Pos struct {
	Line, Col int
	typ       reflect.Type // what the key's value decodes into, for messages
}

// Decode decodes node into v as Parse decodes the config; key is where node
// stands ("watch[2].spot"), pos receives each key's place below it.
func Decode(node ast.Node, v any, key string, pos map[string]Pos) error {
	at := map[string]Pos{}
	err := checkKeys(node, reflect.TypeOf(v), key, at)
	maps.Copy(pos, at)
	if err != nil {
		return err // its message names the key
	}
	if err := yaml.NodeToValue(node, v, yaml.DisallowUnknownField()); err != nil {
		return explain(err, at)
	}
	return nil
}
