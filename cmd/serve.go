package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	// Clients send their TZ; a server on a minimal image still knows the zones.
	_ "time/tzdata"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/server"
	"github.com/gpumarket/gpumarket/tui"
)

func (cl *cli) serveCmd() *cobra.Command {
	var sf serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the TUI over SSH to the keys of an authorized_keys file",
		Long: `serve runs an SSH server whose every session is the gpumarket TUI, all
watching one shared market feed (thirty sessions cost the clouds what one does).
The feed holds --window of history (default: config window); a session's w
cycles up to it, never making the feed fetch and hold more for everyone.

Only public keys listed in the authorized_keys file may log in; the file is
re-read at every login, so adding a key needs no restart. Like OpenSSH's
StrictModes, an authorized_keys or host key file that anyone but this user
(or root) could change, or a host key others could read, is refused: at
start the server does not run; if the authorized_keys file becomes unsafe
while it runs, every login is refused (and logged) until it is fixed. A
weak host key (RSA under 2048 bits, DSA) is refused too.

Each key is a viewer (sees everything, spends nothing) unless given the
booker role:
  config serve.roles:   {"SHA256:…": booker}   (fingerprint as ssh-keygen -lf prints it)
  the key's options:    environment="GPUMARKET_ROLE=booker" ssh-ed25519 AAAA… alice
  the key's comment:    ssh-ed25519 AAAA… alice gpumarket-role=booker
serve.roles, when it names the key, decides (either way). Otherwise the line
decides; if its option and comment disagree, the key is a viewer.
The ledger records each action with the key's fingerprint and comment.

Sessions count toward serve.max_sessions, and so does a connection with no
session (ssh -N), which is closed after 30 seconds without one. The server
runs the TUI only: a command (ssh HOST id) is refused.

Connect with: ssh -t -p PORT HOST`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cl.withApp(cmd, func(a *runner) error { return a.runServe(cmd, sf) })
		},
	}
	f := c.Flags()
	f.StringVar(&sf.listen, "listen", "", "address to listen on, host:port (default: config serve.listen, else 127.0.0.1:2222)")
	f.StringVar(&sf.hostKey, "host-key", "", "the server's SSH host key, created on first use (default: config serve.host_key, else <data dir>/"+server.HostKeyName+")")
	f.StringVar(&sf.authorizedKeys, "authorized-keys", "", "authorized_keys file of the keys that may log in (default: config serve.authorized_keys; required)")
	return c
}

// serveFlags are serve's flags over config serve.*.
type serveFlags struct{ listen, hostKey, authorizedKeys string }

// runServe serves until the context ends; the app's loops outlive it, so
// sessions drain before withApp closes them.
func (a *runner) runServe(cmd *cobra.Command, f serveFlags) error {
	e := a.env
	sc := e.Config.Serve
	flags := cmd.Flags()
	if flags.Changed("listen") {
		sc.Listen = f.listen
		if _, port, err := net.SplitHostPort(sc.Listen); err != nil || port == "" {
			return usagef("--listen %q: want host:port such as 127.0.0.1:2222", sc.Listen)
		}
	}
	if flags.Changed("host-key") {
		sc.HostKey = f.hostKey
		if sc.HostKey == "" {
			return usagef("--host-key %q: want a file path", sc.HostKey)
		}
	}
	if flags.Changed("authorized-keys") {
		sc.AuthorizedKeys = f.authorizedKeys
	}
	if sc.AuthorizedKeys == "" {
		return usagef("--authorized-keys: no authorized_keys file given (flag or config serve.authorized_keys); without one nobody could log in")
	}
	if _, err := os.Stat(sc.AuthorizedKeys); errors.Is(err, fs.ErrNotExist) {
		return usagef("--authorized-keys %q: no such file; want an authorized_keys file listing the keys that may log in", sc.AuthorizedKeys)
	}

	// A server has no TUI of its own: its log goes to stderr.
	e.Log = slog.New(slog.NewTextHandler(e.errOut, &slog.HandlerOptions{Level: logLevel(slog.LevelInfo)}))

	// The shared hub holds the configured window; no session widens it for all.
	a.SharedWindow = true
	h, err := a.Hub(cmd.Context())
	if err != nil {
		return err
	}
	svc, err := a.Booking(h.Providers(), 0)
	if err != nil {
		return err
	}
	st, _ := a.Ledger() // opened by Booking
	a.KeepLedger(svc)
	a.DriveJobs(svc, h.Providers())
	// One evaluator for the server: fifty sessions tell each alert once.
	if _, err := a.Watcher(h, svc); err != nil {
		return err
	}

	srv, err := server.New(server.Options{
		Listen:             sc.Listen,
		HostKeyPath:        sc.HostKey,
		DataDir:            e.DataDir,
		AuthorizedKeysPath: sc.AuthorizedKeys,
		Roles:              sc.Roles,
		IdleTimeout:        sc.IdleTimeout.D(),
		MaxSessions:        sc.MaxSessions,
		Hub:                h,
		NewModel:           sessionModel(a, h, svc),
		Drain:              app.DrainLedger(st, a.Now()),
		Logger:             e.Log,
	})
	if err != nil {
		return err
	}
	if err := srv.ListenAndServe(cmd.Context()); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// sessionModel is the factory of one SSH session's TUI.
func sessionModel(a *runner, h *feed.Hub, svc *ledger.Service) func(server.SessionInfo) tea.Model {
	shared := tui.NewShared() // the Market's rows, derived once for every session
	return func(info server.SessionInfo) tea.Model {
		role := tui.RoleViewer
		if info.Role == server.RoleBooker {
			role = tui.RoleBooker
		}
		opt := a.tuiOptions(h, svc)
		opt.Role, opt.Actor, opt.NoColor, opt.Context = role, info.Actor, info.NoColor, info.Context
		opt.Shared = shared
		if loc := sessionZone(info.Environ); loc != nil {
			opt.Now = func() time.Time { return a.Now().In(loc) }
		}
		return tui.New(opt)
	}
}

// sessionZone is the client's TZ (ssh -o SetEnv=TZ=…), so times are the attendee's; nil if unknown.
func sessionZone(environ []string) *time.Location {
	tz := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "TZ="); ok {
			tz = strings.TrimPrefix(v, ":")
		}
	}
	if tz == "" {
		return nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil
	}
	return loc
}
