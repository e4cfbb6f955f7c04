package config

import (
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Rules is the `watch:` list as written. The watch package reads and
// checks it (watch.ConfigRules), where each kind of rule is defined.
type Rules []ast.Node

// UnmarshalYAML keeps each rule's node, with its place in the file.
func (r *Rules) UnmarshalYAML(node ast.Node) error {
	for {
		switch n := node.(type) {
		case *ast.TagNode:
			node = n.Value
			continue
		case *ast.AnchorNode:
			node = n.Value
			continue
		case *ast.NullNode:
			*r = nil
			return nil
		case *ast.SequenceNode:
			*r = append(Rules(nil), n.Values...)
			return nil
		}
		return nodeErr(node, "want a list of rules such as [{name: cheap-p5, spot: {…}}]")
	}
}

var rulesType = reflect.TypeFor[Rules]()

// Defaults and limits of `notify:`.
const (
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
	// Retries is how many times a POST that met a 5xx or a 429 is tried
	// again, with backoff (default DefaultWebhookRetries).
	Retries *int `yaml:"retries,omitempty"`
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
		return keyErr("notify.command[0]", "empty; want the program to run first, such as [notify-send, gpumarket]")
	}
	if n.CommandTimeout != 0 && (n.CommandTimeout.D() < 0 || n.CommandTimeout.D() > 10*time.Minute) {
		return keyErr("notify.command_timeout", "%s; want a duration above 0, at most 10m, such as 10s", n.CommandTimeout.D())
	}
	if w := n.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		if w.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
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

// RedactURL is a webhook URL as messages may say it: its scheme and
// host. Its path is its secret (a Slack hook's is all it takes to post).
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
type Pos struct{ Line, Col int }

// Decode decodes a YAML node into v (a pointer to a struct of yaml
// tags) as Parse decodes the config: an unknown key is refused with the
// keys accepted where it stands, a value of the wrong type with what the
// key accepts. key is where the node stands ("watch[2].spot"): messages
// name keys from there, and pos receives where each key below it is
// written. Errors are placed: InFile turns them into *FileError.
func Decode(node ast.Node, v any, key string, pos map[string]Pos) error {
	at := map[string]position{}
	err := checkKeys(node, reflect.TypeOf(v), key, at)
	if err == nil {
		err = yaml.NodeToValue(node, v, yaml.DisallowUnknownField())
	}
	for k, p := range at {
		pos[k] = Pos{p.line, p.col}
	}
	if err != nil {
		return explain(err, at)
	}
	return nil
}

// NodeError is an error at node's place in its file.
func NodeError(node ast.Node, format string, args ...any) error {
	return nodeErr(node, format, args...)
}

// InFile is a *FileError of file for an error Decode or NodeError
// returned, placed where they say.
func InFile(file string, err error) error { return fileError(file, err) }

// validateWatch checks `notify:`; the rules are the watch package's to
// check.
func (c *Config) validateWatch() error { return c.Notify.validate() }
