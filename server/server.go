// Package server serves the gpumarket TUI over SSH with one model per session
// from a factory, so it depends on no view code.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2"
	"charm.land/wish/v2/logging"
	"charm.land/wish/v2/recover"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

type Options struct {
	// Listen is the address ListenAndServe uses (default "127.0.0.1:2222").
	Listen string
	// HostKeyPath defaults to DataDir/ssh_host_ed25519_key.
	HostKeyPath string
	DataDir     string
	// AuthorizedKeysPath lists the keys that may log in (required).
	AuthorizedKeysPath string
	// Roles override the file's roles by fingerprint.
	Roles map[string]string
	// IdleTimeout ends a session after this long without a keypress; 0 never.
	IdleTimeout time.Duration
	// MaxSessions caps the places in use at once; 0 means no cap.
	MaxSessions int
	// NoSessionTimeout closes a connection with no session this long (default 30s).
	NoSessionTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown (default 30s).
	ShutdownTimeout time.Duration
	// Hub is the one market feed; sessions subscribe themselves.
	Hub *feed.Hub
	// NewModel builds one session's model, sharing no mutable state (required).
	NewModel func(SessionInfo) tea.Model
	// Drain waits for money actions in flight once the sessions have ended.
	Drain  func(context.Context) error
	Logger *slog.Logger
}

type Server struct {
	opt  Options
	log  *slog.Logger
	keys *keyring
	ssh  *ssh.Server
	// hostKey's fingerprint is logged for operators to tell users.
	hostKey string

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

// New checks the options and loads the keys; nothing listens until Serve.
func New(opt Options) (*Server, error) {
	opt.Listen = cmp.Or(opt.Listen, "127.0.0.1:2222")
	opt.Logger = cmp.Or(opt.Logger, slog.New(slog.DiscardHandler))
	domain.OrDefault(&opt.ShutdownTimeout, 30*time.Second)
	domain.OrDefault(&opt.NoSessionTimeout, defaultNoSessionTimeout)
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
		// The host key: without one wish would write one into ./id_ed25519.
		func(srv *ssh.Server) error {
			srv.AddHostKey(signer)
			srv.ServerConfigCallback = s.serverConfig
			srv.HandshakeTimeout = 30 * time.Second
			return nil
		},
		wish.WithPublicKeyAuth(s.authorize),
		ssh.WrapConn(s.trackConn),
		// An emulated PTY: no OS pseudo-terminal per session; the colour profile
		// comes from the client's TERM and environment.
		ssh.EmulatePty(),
		wish.WithMiddleware(
			recover.MiddlewareWithLogger(std, s.sessionMiddleware),
			logging.MiddlewareWithLogger(std),
		),
	)
	if err != nil {
		return nil, fmt.Errorf("ssh server: %w", err)
	}
	return s, nil
}

// authorize is the only handler: no password or keyboard-interactive is offered.
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

// ListenAndServe serves on Options.Listen until ctx ends or Shutdown.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opt.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.opt.Listen, err)
	}
	return s.Serve(ctx, ln)
}

const serveGCPercent = 25

// Serve serves on ln until ctx ends (then Shutdown) or Shutdown is called.
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
		// Views are remade at each update: a quarter of the live heap keeps idle sessions small.
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

func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Shutdown ends every session, then drains money actions in flight; ctx bounds the wait.
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
	open := slices.Collect(maps.Keys(s.sessions))
	s.mu.Unlock()
	hubSubs := 0
	if s.opt.Hub != nil {
		hubSubs = s.opt.Hub.Subscribers()
	}
	s.log.Info("shutting down", "sessions", len(open), "hub_subscribers", hubSubs)
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

// defaultNoSessionTimeout is as long as a handshake may take.
const defaultNoSessionTimeout = 30 * time.Second

// conn is one SSH connection; authenticated and sessionless, it holds a place.
type conn struct {
	nc     net.Conn
	remote string
	// Guarded by Server.mu:
	authed   bool      // its key was verified: it holds a place
	sessions int       // TUI sessions running on it
	timer    connTimer // closes it after NoSessionTimeout without a session
	closed   bool
}

type connKey struct{}

// connTimer is the part of *time.Timer a connection uses, faked in tests.
type connTimer interface {
	Reset(time.Duration) bool
	Stop() bool
}

func realTimer(d time.Duration, f func()) connTimer { return time.AfterFunc(d, f) }

func connOf(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// trackConn arms each accepted connection's no-session timer, which bounds the handshake too.
func (s *Server) trackConn(ctx ssh.Context, nc net.Conn) net.Conn {
	c := &conn{nc: nc, remote: addrString(nc.RemoteAddr())}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil // the ssh server closes it
	}
	s.conns[c] = struct{}{}
	c.timer = s.afterFunc(s.opt.NoSessionTimeout, func() { s.closeIfSessionless(c) })
	s.mu.Unlock()
	ctx.SetValue(connKey{}, c)
	context.AfterFunc(ctx, func() { // ctx ends when the connection closes
		s.mu.Lock()
		c.closed = true
		c.timer.Stop()
		delete(s.conns, c)
		s.mu.Unlock()
	})
	return nc
}

// serverConfig admits a connection once its key is verified, not merely queried.
func (s *Server) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	return &gossh.ServerConfig{
		VerifiedPublicKeyCallback: func(_ gossh.ConnMetadata, _ gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
			if msg := s.admitConn(connOf(ctx)); msg != "" {
				// The client prints the banner; the error fails only this attempt.
				return nil, &gossh.BannerError{Err: errors.New(msg), Message: msg + "\r\n"}
			}
			return perms, nil
		},
	}
}

// admitConn lets an authenticated connection hold a place, or says why not.
func (s *Server) admitConn(c *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.refusalLocked(c); msg != "" {
		return msg
	}
	if c != nil {
		c.authed = true
	}
	return ""
}

// placesLocked counts places in use but the asking connection's own.
func (s *Server) placesLocked(asking *conn) int {
	n := len(s.sessions)
	for c := range s.conns {
		if c != asking && c.authed && c.sessions == 0 {
			n++
		}
	}
	return n
}

func (s *Server) closeIfSessionless(c *conn) {
	s.mu.Lock()
	if c.closed || c.sessions > 0 {
		s.mu.Unlock()
		return
	}
	authed := c.authed
	s.mu.Unlock()
	s.log.Info("closed a connection without a session", "remote", c.remote, "authenticated", authed,
		"after", s.opt.NoSessionTimeout.String())
	_ = c.nc.Close()
}

// sessionEndedLocked gives c its place back and re-arms its timer.
func (c *conn) sessionEndedLocked(d time.Duration) {
	c.sessions--
	if c.sessions == 0 && !c.closed {
		c.timer.Reset(d)
	}
}

func fullMessage(max int) string {
	return fmt.Sprintf("gpumarket: the server is full: it allows %d sessions at once; try again later", max)
}
