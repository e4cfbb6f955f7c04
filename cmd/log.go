package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// One-shot commands log as "gpumarket: warning: …" lines for people and
// scripts; serve, watch and the TUI's log file keep slog's text.

// logLevel is warnings, or everything with GPUMARKET_DEBUG set.
func logLevel(quiet slog.Level) slog.Level {
	if os.Getenv("GPUMARKET_DEBUG") != "" {
		return slog.LevelDebug
	}
	return quiet
}

// lineHandler writes "gpumarket: warning: <message> (key value, …)" lines.
type lineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr // from WithAttrs, their keys already grouped
	group string      // from WithGroup: "a.b." prefixes later keys
}

func newLineHandler(w io.Writer, level slog.Leveler) *lineHandler {
	return &lineHandler{mu: &sync.Mutex{}, w: w, level: level}
}

// Enabled implements slog.Handler.
func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle implements slog.Handler.
func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("gpumarket: ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	case r.Level < slog.LevelInfo:
		b.WriteString("debug: ")
	}
	b.WriteString(flat(r.Message))
	var parts []string
	for _, a := range h.attrs {
		parts = appendAttr(parts, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		parts = appendAttr(parts, h.group, a)
		return true
	})
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// appendAttr adds "key value" for a, prefixed by its groups; empty ones are left out.
func appendAttr(parts []string, prefix string, a slog.Attr) []string {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return parts
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			parts = appendAttr(parts, prefix, g)
		}
		return parts
	}
	return append(parts, fmt.Sprintf("%s%s %s", prefix, a.Key, flat(a.Value.String())))
}

// flat puts a message of several lines (an errors.Join) on one.
func flat(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// WithAttrs implements slog.Handler.
func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		if h.group != "" {
			a = slog.Attr{Key: strings.TrimSuffix(h.group, "."), Value: slog.GroupValue(a)}
		}
		c.attrs = append(c.attrs, a)
	}
	return &c
}

// WithGroup implements slog.Handler.
func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}
