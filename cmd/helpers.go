package cmd

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
)

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
