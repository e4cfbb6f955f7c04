package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
)

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
