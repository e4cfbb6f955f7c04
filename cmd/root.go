// Package cmd is gpumarket's command line: cobra wiring over the app
// (package app) and the TUI. Each command has its own file (prices beside
// history, ledger beside usage); what they all use is in root.go (the tree,
// the run, exit codes and bad usage, the version), env.go (the common flags,
// confirmations, log lines) and output.go.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/tui"
)

// cli is what the command tree of one run shares; tests give their own table.
type cli struct {
	table app.Table
}

// runner is one command's run: its settings and streams, and the app
// assembled over them (closed after the command).
type runner struct {
	*env
	*app.App
}

// withApp loads the settings and runs f over the command's app (nothing
// built or started yet), closing it after.
func (c *cli) withApp(cmd *cobra.Command, f func(*runner) error) error {
	e, err := c.setup(cmd)
	if err != nil {
		return err
	}
	a := c.appOf(cmd.Context(), e)
	defer a.Close()
	return f(a)
}

// appOf is the app over settings already made (tests make their own).
func (c *cli) appOf(parent context.Context, e *env) *runner {
	return &runner{env: e, App: app.New(parent, &e.Settings, c.table, e.errOut)}
}

// say writes a line of what happened on stderr.
func (e *env) say(msg string) { fmt.Fprintln(e.errOut, "gpumarket: "+msg) }

// hubProviders is the hub's sources; none without a hub.
func hubProviders(h *feed.Hub) []domain.Provider {
	if h == nil {
		return nil
	}
	return h.Providers()
}

// rootCmd builds the whole command tree. It is called once per run so
// that no flag value outlives a run.
func (c *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpumarket",
		Short: "A terminal UI for the GPU capacity market",
		Long: `gpumarket streams spot prices, interruption rates and capacity-block offerings
of AWS and Azure GPU instances into one live screen, compares pools by what a
job pays per useful GPU-hour, plans jobs against deadlines, and books capacity
with a keypress.

With no config file and no --provider it shows a simulated market.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withApp(cmd, func(a *runner) error { return a.runRoot(cmd.Context()) })
		},
	}
	root.Version = version()
	root.SetVersionTemplate("gpumarket {{.Version}}\n")
	root.SetFlagErrorFunc(flagErrorFunc)
	root.PersistentPreRunE = checkFlags
	c.addCommonFlags(root)
	root.AddCommand(
		c.pricesCmd(), c.historyCmd(), c.offeringsCmd(), c.bookCmd(),
		c.fleetCmd(), c.ledgerCmd(), c.usageCmd(), c.serveCmd(), c.planCmd(), c.backtestCmd(), c.watchCmd(),
	)
	root.AddCommand(c.cacheCmd(), c.jobCmd())
	return root
}

func (a *runner) runRoot(ctx context.Context) error {
	// Under the TUI nothing may print to the terminal: logs go to a file.
	logPath := filepath.Join(a.DataDir, "gpumarket.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer lf.Close()
	a.Log = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: logLevel(slog.LevelInfo)}))

	h, err := a.Hub(ctx)
	if err != nil {
		return err
	}
	svc, err := a.Booking(h.Providers(), 0)
	if err != nil {
		return err
	}
	a.KeepLedger(svc)
	a.DriveJobs(svc, h.Providers())
	if _, err := a.Watcher(h, svc); err != nil {
		return err
	}
	opt := a.tuiOptions(h, svc)
	opt.Role, opt.Actor, opt.Context = tui.RoleBooker, app.LocalActor(), ctx
	opt.NoColor = os.Getenv("NO_COLOR") != ""
	err = tui.Run(ctx, opt)
	if errors.Is(err, context.Canceled) {
		return nil // SIGINT/SIGTERM: a clean exit
	}
	return err
}

// tuiOptions are what every TUI session of this process shares: one hub,
// booking service and evaluator, so two sessions never buy the same
// offering and each alert is told once. The caller adds the session's own.
func (a *runner) tuiOptions(h *feed.Hub, svc *ledger.Service) tui.Options {
	return tui.Options{
		Booking:   svc,
		Hub:       h,
		Window:    a.Query.Window,
		GPUs:      a.Query.GPUs,
		Regions:   a.Query.Regions,
		Effective: a.PlanBasis(),
		Speeds:    a.PlanSpeeds(),
		Usage:     a.Tracker(hubProviders(h)),
		Watch:     a.Watching(),
		Now:       a.Now,
	}
}

// version is the module version the binary was built at, else "(devel)",
// with the VCS revision and changes when the build recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return versionOf(bi)
}

// versionOf words a build's version: "v1.2.3", "(devel) revision
// 1a2b3c4d5e6f (2026-11-30T10:00:00Z, modified)".
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		return v
	}
	v += " revision " + rev[:min(len(rev), 12)]
	notes := []string{vcs["vcs.time"]}
	if vcs["vcs.modified"] == "true" {
		notes = append(notes, "modified")
	}
	if notes = slices.DeleteFunc(notes, func(n string) bool { return n == "" }); len(notes) > 0 {
		v += " (" + strings.Join(notes, ", ") + ")"
	}
	return v
}

// Exit codes of DESIGN.md's CLI contract.
const (
	exitOK      = 0
	exitFailure = app.ExitFailure
	exitUsage   = app.ExitUsage
)

// usageError is bad usage: exit 2, one line naming the flag and the form.
type usageError = app.UsageError

// reported returns the error of a failure said already.
func reported(code int) error { return app.SaidError{Code: code} }

// usagef returns a usage error; name the flag and what it accepts.
func usagef(format string, args ...any) error { return app.Usagef(format, args...) }

// Execute runs gpumarket and returns the exit code; signals cancel the context.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// run executes one command line; tests call it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newCLI().run(ctx, args, stdin, stdout, stderr)
}

// newCLI is the command line of a normal run.
func newCLI() *cli { return &cli{table: app.DefaultTable()} }

// run executes one command line with the given streams.
func (c *cli) run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := c.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var said app.SaidError
	if errors.As(err, &said) {
		return said.Code
	}
	if msg, ok := usageMessage(err); ok {
		fmt.Fprintf(stderr, "gpumarket: %s\n", app.FirstLine(msg))
		return exitUsage
	}
	fmt.Fprintf(stderr, "gpumarket: %s\n", app.FirstLine(err.Error()))
	return exitFailure
}

// usageMessage recognises bad usage of every origin and words it as one line.
func usageMessage(err error) (string, bool) {
	var ue *usageError
	if errors.As(err, &ue) {
		return ue.Msg, true
	}
	// A config file read with a bad key or value is bad usage; an unreadable one is not.
	var fe *config.FileError
	if errors.As(err, &fe) {
		return err.Error(), true
	}
	if errors.Is(err, domain.ErrInvalidQuery) {
		// A provider's refusal of terms names the value and what is accepted.
		return err.Error(), true
	}
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		return fmt.Sprintf("--%s %q: want %s", f.Name, iv.GetValue(), flagForm(f)), true
	}
	var vr *pflag.ValueRequiredError
	if errors.As(err, &vr) {
		if f := vr.GetFlag(); f != nil {
			name := "--" + f.Name
			if vr.GetSpecifiedShortnames() != "" && f.Shorthand != "" {
				name = "-" + f.Shorthand
			}
			return fmt.Sprintf("%s needs a value: %s", name, f.Usage), true
		}
		return vr.Error(), true
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		return ne.Error() + " (see --help for the accepted flags)", true
	}
	var se *pflag.InvalidSyntaxError
	if errors.As(err, &se) {
		return se.Error(), true
	}
	// cobra's own argument checks are plain errors with these prefixes (v1.10).
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "received ", "invalid argument", "unknown flag", "unknown shorthand flag", "flag needs an argument", "bad flag syntax", "if any flags in the group", "required flag"} {
		if strings.HasPrefix(msg, p) {
			return msg + " (see --help)", true
		}
	}
	return "", false
}

// flagForm says what a flag of a built-in type accepts.
func flagForm(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "duration":
		return "a duration such as 30s, 2m or 1h"
	case "bool":
		return "true or false"
	case "stringSlice", "stringArray":
		return "a comma list"
	}
	return "a " + f.Value.Type()
}

// flagErrorFunc marks every flag parse error as a usage error.
func flagErrorFunc(_ *cobra.Command, err error) error {
	if msg, ok := usageMessage(err); ok {
		return &usageError{Msg: msg}
	}
	return &usageError{Msg: err.Error()}
}
