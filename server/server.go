// Package server serves the gpumarket TUI over SSH (wish): public-key
// logins from an authorized_keys file, a role per key (viewer or booker),
// one Bubble Tea program per session over one shared market hub, idle and
// session limits, and a graceful shutdown that tells every session and
// waits for money-spending actions in flight.
//
// The server does not build TUI models itself: it is given a factory, so
// it depends on no view code and its tests can use a small model.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2"
	"charm.land/wish/v2/logging"
	"charm.land/wish/v2/recover"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/feed"
)

// Options configure a Server.
type Options struct {
	// Listen is the TCP address ListenAndServe listens on
	// (default "127.0.0.1:2222").
	Listen string
	// HostKeyPath is the server's private host key, created on first use.
	// When empty it is DataDir/ssh_host_ed25519_key.
	HostKeyPath string
	// DataDir is where the host key lives when HostKeyPath is empty.
	DataDir string
	// AuthorizedKeysPath lists the keys that may log in (required). It is
	// re-read at every login.
	AuthorizedKeysPath string
	// Roles gives roles by key fingerprint ("SHA256:…" → "viewer" or
	// "booker"); they override what the authorized_keys file says.
	Roles map[string]string
	// IdleTimeout ends a session after this long without a keypress;
	// 0 never does. Output does not count: the market keeps drawing.
	IdleTimeout time.Duration
	// MaxSessions caps the sessions open at once; 0 means no cap. An
	// authenticated connection with no session (ssh -N, or one whose
	// sessions have ended) holds one place too, so such connections
	// cannot crowd out sessions unseen.
	MaxSessions int
	// NoSessionTimeout closes a connection that has no session for this
	// long: from its start (which bounds the handshake too) and from the
	// end of its last session (default 30s). A connection exists to carry
	// a TUI session; one that carries none holds a place of MaxSessions
	// and memory, and IdleTimeout, which counts keypresses in a session,
	// could never end it.
	NoSessionTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown Serve does when its
	// context ends (default 30s).
	ShutdownTimeout time.Duration
	// Hub is the one market feed every session's model subscribes to.
	// The server only reads its subscriber count for the logs; the
	// models subscribe themselves with SessionInfo.Context.
	Hub *feed.Hub
	// NewModel builds the model of one session (required). It is called
	// once per session, on the session's goroutine, and must return a
	// model that shares no mutable state with any other.
	NewModel func(SessionInfo) tea.Model
	// Drain waits for money-spending actions that are still running (the
	// booking service's wait); Shutdown calls it after the sessions have
	// ended, bounded by its context, so a purchase is never cut midway.
	Drain func(context.Context) error
	// Logger receives connection and session logs (default: discard).
	Logger *slog.Logger
}

// Server is an SSH server of TUI sessions.
type Server struct {
	opt  Options
	log  *slog.Logger
	keys *keyring
	ssh  *ssh.Server
	// hostKey is the host key's fingerprint, logged so that an operator
	// can tell users what to expect on first connect.
	hostKey string

	// afterFunc starts a connection's no-session timer (time.AfterFunc).
	afterFunc func(time.Duration, func()) connTimer

	mu        sync.Mutex
	sessions  map[*session]struct{}
	conns     map[*conn]struct{}
	active    sync.WaitGroup
	listeners []net.Listener
	closing   bool
	stopped   chan struct{} // closed when Shutdown has finished
	stopErr   error
	stopOnce  sync.Once
}

// New checks the options, loads (or creates) the host key and reads the
// authorized keys. Nothing listens until Serve or ListenAndServe.
func New(opt Options) (*Server, error) {
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:2222"
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = 30 * time.Second
	}
	if opt.NoSessionTimeout <= 0 {
		opt.NoSessionTimeout = defaultNoSessionTimeout
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.NewModel == nil {
		return nil, errors.New("server: NewModel is required")
	}
	if opt.AuthorizedKeysPath == "" {
		return nil, errors.New("no authorized keys file: set --authorized-keys or serve.authorized_keys; without one nobody could log in")
	}
	if opt.HostKeyPath == "" {
		if opt.DataDir == "" {
			return nil, errors.New("server: HostKeyPath or DataDir is required")
		}
		opt.HostKeyPath = filepath.Join(opt.DataDir, HostKeyName)
	}
	if opt.MaxSessions < 0 {
		return nil, fmt.Errorf("max sessions %d: want 0 (no cap) or more", opt.MaxSessions)
	}
	if opt.IdleTimeout < 0 {
		return nil, fmt.Errorf("idle timeout %s: want 0 (none) or more", opt.IdleTimeout)
	}
	roles := make(map[string]Role, len(opt.Roles))
	for fp, r := range opt.Roles {
		if !strings.HasPrefix(fp, "SHA256:") {
			return nil, fmt.Errorf("serve.roles key %q: want a fingerprint SHA256:… as ssh-keygen -lf prints it", fp)
		}
		role, err := ParseRole(r)
		if err != nil {
			return nil, fmt.Errorf("serve.roles[%s]: %w", fp, err)
		}
		roles[fp] = role
	}
	log := opt.Logger
	keys, err := newKeyring(opt.AuthorizedKeysPath, roles, log)
	if err != nil {
		return nil, err
	}
	signer, err := LoadOrCreateHostKey(opt.HostKeyPath, log)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opt: opt, log: log, keys: keys, hostKey: gossh.FingerprintSHA256(signer.PublicKey()),
		sessions:  map[*session]struct{}{},
		conns:     map[*conn]struct{}{},
		stopped:   make(chan struct{}),
		afterFunc: realTimer,
	}
	std := slog.NewLogLogger(log.Handler(), slog.LevelInfo)
	s.ssh, err = wish.NewServer(
		wish.WithAddress(opt.Listen),
		wish.WithVersion("gpumarket"),
		// Set before anything else looks: without a host key wish would
		// generate one into ./id_ed25519.
		func(srv *ssh.Server) error {
			srv.AddHostKey(signer)
			return nil
		},
		wish.WithPublicKeyAuth(s.authorize),
		// Every connection is tracked from accept to close, and admitted
		// (counted against MaxSessions) once its key is verified.
		ssh.WrapConn(s.trackConn),
		func(srv *ssh.Server) error {
			srv.ServerConfigCallback = s.serverConfig
			return nil
		},
		// An emulated PTY: no OS pseudo-terminal per session (a hundred
		// sessions would hold a hundred), and the colour profile is read
		// from the client's TERM and environment, not probed on a
		// server-side tty.
		ssh.EmulatePty(),
		wish.WithMiddleware(
			recover.MiddlewareWithLogger(std, s.sessionMiddleware),
			logging.MiddlewareWithLogger(std),
		),
		func(srv *ssh.Server) error {
			srv.HandshakeTimeout = 30 * time.Second
			return nil
		},
	)
	if err != nil {
		return nil, fmt.Errorf("ssh server: %w", err)
	}
	return s, nil
}

// authorize is the only authentication handler: no password and no
// keyboard-interactive handler is set, so the server offers neither.
func (s *Server) authorize(ctx ssh.Context, key ssh.PublicKey) bool {
	k, err := s.keys.lookup(key)
	if err != nil {
		if errors.Is(err, errKeysUnsafe) {
			err = errKeysUnsafe // the keyring has logged the detail once
		}
		s.log.Info("refused key", "fingerprint", fingerprint(key), "user", ctx.User(), "remote", addrString(ctx.RemoteAddr()), "why", err)
		return false
	}
	s.log.Debug("accepted key", "fingerprint", k.Fingerprint, "comment", k.Comment, "role", k.Role)
	return true
}

// Addr returns the address the server listens on, once Serve has started
// (nil before): tests listen on port 0 and dial this.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.listeners) == 0 {
		return nil
	}
	return s.listeners[0].Addr()
}

// ListenAndServe listens on Options.Listen and serves until ctx ends or
// Shutdown is called; then it shuts down gracefully and returns.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opt.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.opt.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// serveGCPercent is the server's GOGC unless the environment sets one.
const serveGCPercent = 25

// Serve serves SSH on ln until ctx ends or Shutdown is called. When ctx
// ends it runs Shutdown bounded by Options.ShutdownTimeout. It returns
// once the server has stopped: nil after a graceful shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ssh.ErrServerClosed
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the sessions' views, remade at each market
		// update: collecting at a quarter of the live heap, not all of
		// it, keeps an idle session near what it holds (50 idle sessions
		// took the same CPU at GOGC 25 as at 50).
		debug.SetGCPercent(serveGCPercent)
	}
	s.log.Info("serving gpumarket over SSH", "addr", ln.Addr().String(), "host_key", s.hostKey,
		"authorized_keys", s.opt.AuthorizedKeysPath)

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownTimeout)
			defer cancel()
			if err := s.Shutdown(sctx); err != nil {
				s.log.Warn("shutdown", "err", err)
			}
		}
	}()

	err := s.ssh.Serve(ln)
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if !closing {
		return fmt.Errorf("serve SSH on %s: %w", ln.Addr(), err)
	}
	<-s.stopped
	return s.stopErr
}

// Sessions counts the sessions open now.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Shutdown stops accepting connections, tells every session that the
// server is shutting down and ends it, waits for the sessions to finish
// and then for in-flight actions (Options.Drain), and closes what is
// left. ctx bounds the waiting; on its end the remaining connections are
// closed anyway and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	first := false
	s.stopOnce.Do(func() { first = true })
	if !first {
		select {
		case <-s.stopped:
			return s.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	s.closing = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	open := make([]*session, 0, len(s.sessions))
	for st := range s.sessions {
		open = append(open, st)
	}
	s.mu.Unlock()
	s.log.Info("shutting down", "sessions", len(open), "hub_subscribers", s.subscribers())
	for _, st := range open {
		st.end(msgShutdown)
	}

	var errs []error
	ended := make(chan struct{})
	go func() {
		s.active.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("wait for sessions to end: %w", ctx.Err()))
	}
	if s.opt.Drain != nil {
		if err := s.opt.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("wait for actions in flight: %w", err))
		}
	}
	if err := s.ssh.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, fmt.Errorf("close connections: %w", err))
	}
	s.stopErr = errors.Join(errs...)
	close(s.stopped)
	return s.stopErr
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func fingerprint(key ssh.PublicKey) string {
	if key == nil {
		return ""
	}
	return gossh.FingerprintSHA256(key)
}
