package config

import (
	"maps"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

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
	return nodeErr(bare(node), "want a list of rules such as [{name: cheap-p5, spot: {…}}]")
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

// NodeError is an error at node's place in its file.
func NodeError(node ast.Node, format string, args ...any) error {
	return nodeErr(node, format, args...)
}

// InFile is a *FileError of an error Decode or NodeError returned.
func InFile(file string, err error) error { return fileError(file, err) }

func (c *Config) validateWatch() error { return c.Notify.validate() }
