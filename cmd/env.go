package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

// env is what every command needs, built per run so two runs share nothing.
type env struct {
	app.Settings
	out    io.Writer
	errOut io.Writer
	stdin  io.Reader
}

// Names of the persistent flags every command shares.
const (
	flagProvider = "provider"
	flagGPU      = "gpu"
	flagRegion   = "region"
	flagWindow   = "window"
	flagConfig   = "config"
	flagSeed     = "seed"
)

// addCommonFlags adds the common flags; setup reads them back from the flag set.
func (c *cli) addCommonFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String(flagProvider, "", "market data sources, a comma list of "+joinNames(c.table.Names())+" (default: config providers, else "+c.table.Fallback()+")")
	pf.String(flagGPU, "", "GPU models, a comma list such as H100,A100 (one of "+strings.Join(domain.GPUModels, ", ")+")")
	pf.String(flagRegion, "", "regions, a comma list such as us-east-1,eastus")
	pf.String(flagWindow, "", "history window: "+domain.WindowForm+" (default: config window, else 24h)")
	pf.String(flagConfig, "", "config file (default: $GPUMARKET_CONFIG, else $XDG_CONFIG_HOME/gpumarket/config.yaml)")
	pf.Int64(flagSeed, 0, "seed of the simulated market (default: config sim.seed, else 1)")
}

// setup loads the config (Default → file → env → flags → Validate) and the query.
func (c *cli) setup(cmd *cobra.Command) (*env, error) {
	// A bad flag is bad usage (exit 2) whatever the config file holds.
	flags := cmd.Flags()
	var provs, gpus, regions []string
	var window time.Duration
	var err error
	for _, f := range []struct {
		name string
		list *[]string
	}{{flagProvider, &provs}, {flagGPU, &gpus}, {flagRegion, &regions}} {
		if flags.Changed(f.name) {
			v, _ := flags.GetString(f.name)
			if *f.list, err = parseList(f.name, v, c.table.Names()); err != nil {
				return nil, err
			}
		}
	}
	if flags.Changed(flagWindow) {
		v, _ := flags.GetString(flagWindow)
		if window, err = domain.ParseWindow(v); err != nil {
			return nil, usagef("--window %q: want %s", v, domain.WindowForm)
		}
	}

	path, _ := flags.GetString(flagConfig)
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if gpus != nil {
		cfg.GPUs = gpus
	}
	if regions != nil {
		cfg.Regions = regions
	}
	if window > 0 {
		cfg.Window = config.Window(window)
	}
	if flags.Changed(flagSeed) {
		cfg.Sim.Seed, _ = flags.GetInt64(flagSeed)
	}
	s, err := app.NewSettings(cfg, provs, c.table)
	if err != nil {
		return nil, err
	}
	e := &env{Settings: s, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), stdin: cmd.InOrStdin()}
	e.Log = slog.New(newLineHandler(e.errOut, logLevel(slog.LevelWarn)))
	return e, nil
}

// parseList reads a comma list of --provider (of known), --gpu (in the
// catalog's spelling) or --region (whether a cloud has it is its
// provider's call); an item it cannot read is named with what is accepted.
func parseList(flag, v string, known []string) ([]string, error) {
	bad, want, canon := "unknown provider", "a comma list of "+joinNames(known), func(s string) (string, bool) {
		s = strings.ToLower(s)
		return s, slices.Contains(known, s)
	}
	switch flag {
	case flagGPU:
		bad, want, canon = "unknown GPU", "a comma list of "+strings.Join(domain.GPUModels, ", "), func(s string) (string, bool) {
			if m, ok := domain.CanonicalGPU(s); ok {
				return m, true
			}
			return s, false
		}
	case flagRegion:
		bad, want, canon = "bad region", "a comma list of regions ("+config.RegionForm+")", func(s string) (string, bool) {
			s = strings.ToLower(s)
			return s, config.ValidRegion(s)
		}
	}
	list := domain.SplitList(v)
	if len(list) == 0 {
		return nil, usagef("--%s %q: want %s", flag, v, want)
	}
	for i, s := range list {
		var ok bool
		if list[i], ok = canon(s); !ok {
			return nil, usagef("--%s %q: %s %q; want %s", flag, v, bad, list[i], want)
		}
	}
	return dedupe(list), nil
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

// checkFlags refuses, for every command and before anything is loaded, a
// bad -o or a --timeout that is not positive.
func checkFlags(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	if f := fl.Lookup("output"); f != nil {
		if err := checkOutput(f.Value.String()); err != nil {
			return err
		}
	}
	if timeout, err := fl.GetDuration("timeout"); err == nil && timeout <= 0 {
		return usagef("--timeout %s: want a positive duration such as 60s or 2m", timeout)
	}
	return nil
}

// stdinIsTerminal reports whether r is a terminal a person can answer on.
func stdinIsTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(f.Fd())
}

// needsConfirmation refuses at once a spend that must ask but cannot (no terminal, no --yes).
func (e *env) needsConfirmation(cmdName string, dryRun, yes bool) error {
	if dryRun || yes || stdinIsTerminal(e.stdin) {
		return nil
	}
	return usagef("%s needs a confirmation: pass --yes to go ahead without asking, or --dry-run (stdin is not a terminal)", cmdName)
}

// confirm asks "Type yes to <what>"; y or yes in any case is yes.
func (e *env) confirm(cmdName, what string) error {
	if !stdinIsTerminal(e.stdin) {
		return usagef("%s needs a confirmation: pass --yes to %s without asking (stdin is not a terminal)", cmdName, what)
	}
	fmt.Fprintf(e.errOut, "Type yes to %s (y/yes, anything else cancels): ", what)
	line, err := readLine(e.stdin)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the confirmation: %w", err)
	}
	if !isYes(line) {
		return errors.New("not confirmed: nothing was done")
	}
	return nil
}

// isYes reports whether an answer to a confirmation is a yes.
func isYes(answer string) bool {
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes"
}

// readLine reads byte by byte: a buffered reader would swallow a second answer.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	one := make([]byte, 1)
	for {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return b.String(), nil
			}
			b.WriteByte(one[0])
			if b.Len() > 4096 {
				return b.String(), nil
			}
		}
		if err != nil {
			return b.String(), err
		}
	}
}

func dedupe(list []string) []string {
	out := list[:0]
	for _, v := range list {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

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
