package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2/bubbletea"
	"github.com/charmbracelet/colorprofile"
)

const (
	msgNoPTY    = "gpumarket needs a terminal: connect with ssh -t"
	msgShutdown = "gpumarket: server shutting down"
	msgPanic    = "gpumarket: this session hit an internal error and was closed; the server is still running, reconnect to start afresh"
	msgRevoked  = "gpumarket: your key is no longer in the authorized keys file"
	msgUnsafe   = "gpumarket: the server's authorized keys file is unsafe (others could change it), so every login is refused; the operator has been told"
	// msgCommand: a script must not wait on a screen it cannot read.
	msgCommand = "gpumarket: this server runs only the gpumarket TUI, not commands; connect with ssh -t -p PORT HOST and no command"
)

// quitGrace is how long a program may take to quit before it is killed.
const quitGrace = 2 * time.Second

type SessionInfo struct {
	Role Role
	// Actor names the key for the ledger: "ssh:SHA256:… alice@laptop".
	Actor       string
	Fingerprint string
	Comment     string
	// User is the SSH user name the client gave; it proves nothing.
	User       string
	RemoteAddr string
	// Width and Height are the size at connect; later ones come as messages.
	Width, Height int
	Term          string
	ColorProfile  colorprofile.Profile
	NoColor       bool
	Environ       []string
	// Context ends with the session; money actions must not run under it alone.
	Context context.Context
}

func Actor(fingerprint, comment string) string {
	if comment == "" {
		return "ssh:" + fingerprint
	}
	return "ssh:" + fingerprint + " " + comment
}

type session struct {
	program *tea.Program
	cancel  context.CancelFunc // kills the program
	reason  atomic.Pointer[string]

	lastInput atomic.Int64 // unix nanoseconds of the last byte the user typed
}

// end asks the program to quit, killing it after quitGrace; the first reason stands.
func (st *session) end(reason string) {
	st.reason.CompareAndSwap(nil, &reason)
	go st.program.Quit() // Quit blocks until the event loop reads it
	time.AfterFunc(quitGrace, st.cancel)
}

// sessionMiddleware replaces wish's activeterm and bubbletea middlewares: it
// needs the exit error, the input and a handle to end the program.
func (s *Server) sessionMiddleware(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		code := s.runSession(sess)
		_ = sess.Exit(code)
		next(sess)
	}
}

func (s *Server) runSession(sess ssh.Session) (code int) {
	k, err := s.keys.lookup(sess.PublicKey())
	switch {
	case errors.Is(err, errKeysUnsafe): // the file became unsafe since login
		tell(sess, msgUnsafe)
		return 1
	case err != nil: // removed from the file between login and session
		tell(sess, msgRevoked)
		return 1
	}
	if cmd := sess.RawCommand(); cmd != "" {
		s.log.Info("refused a command", "fingerprint", k.Fingerprint, "command", cmd)
		tell(sess, msgCommand)
		return 1
	}
	conn := connOf(sess.Context())
	pty, winch, ok := sess.Pty()
	if !ok {
		tell(sess, msgNoPTY)
		return 1
	}

	env := append(sess.Environ(), "TERM="+pty.Term)
	noColor := lookupEnv(env, "NO_COLOR") != ""
	profile := colorprofile.Env(env)
	if noColor && profile > colorprofile.ASCII {
		profile = colorprofile.ASCII
	}

	ctx, cancelSession := context.WithCancel(sess.Context())
	defer cancelSession()
	info := SessionInfo{
		Role: k.Role, Actor: Actor(k.Fingerprint, k.Comment),
		Fingerprint: k.Fingerprint, Comment: k.Comment,
		User: sess.User(), RemoteAddr: addrString(sess.RemoteAddr()),
		Width: pty.Window.Width, Height: pty.Window.Height, Term: pty.Term,
		ColorProfile: profile, NoColor: noColor, Environ: env,
		Context: ctx,
	}

	progCtx, cancelProg := context.WithCancel(ctx)
	defer cancelProg()
	st := &session{cancel: cancelProg}
	st.lastInput.Store(time.Now().UnixNano())

	// Resizes are drained until the channel closes: one unread blocks the session's requests.
	var resizeTo atomic.Pointer[tea.Program]
	go func() {
		for w := range winch {
			if p := resizeTo.Load(); p != nil && progCtx.Err() == nil {
				p.Send(tea.WindowSizeMsg{Width: w.Width, Height: w.Height})
			}
		}
	}()

	s.mu.Lock()
	msg := s.refusalLocked(conn)
	s.mu.Unlock()
	if msg != "" { // spare building a model for nothing
		tell(sess, msg)
		return 1
	}
	model := s.opt.NewModel(info)
	if model == nil {
		tell(sess, "gpumarket: could not start a session")
		return 1
	}
	opts := append(bubbletea.MakeOptions(sess),
		tea.WithInput(inputClock{r: sess, last: &st.lastInput}),
		tea.WithColorProfile(profile),
		tea.WithContext(progCtx),
		// The server handles signals: one must not quit a hundred programs.
		tea.WithoutSignalHandler(),
	)
	st.program = tea.NewProgram(model, opts...)
	// Registered only now: Shutdown may end a registered session at once.
	if msg := s.register(st, conn); msg != "" {
		tell(sess, msg)
		return 1
	}
	defer s.unregister(st, conn)
	resizeTo.Store(st.program)
	// The status goes out before the session ends: Shutdown then closes the connection.
	defer func() { _ = sess.Exit(code) }()

	if d := s.opt.IdleTimeout; d > 0 {
		go watchIdle(progCtx, st, d)
	}

	s.log.Info("session start", "actor", info.Actor, "role", info.Role, "term", info.Term,
		"size", fmt.Sprintf("%dx%d", info.Width, info.Height), "profile", profile.String(),
		"sessions", s.Sessions())
	_, err = st.program.Run()
	st.program.Kill() // restores the terminal if Run was cut short
	cancelSession()

	reason := ""
	if r := st.reason.Load(); r != nil {
		reason = *r
	}
	s.log.Info("session end", "actor", info.Actor, "reason", reason, "err", err)
	switch {
	case errors.Is(err, tea.ErrProgramPanic):
		s.log.Error("session panicked; the session was closed, the server goes on", "actor", info.Actor)
		tell(sess, msgPanic)
		return 1
	case reason != "":
		tell(sess, reason)
		return 0
	case err != nil && !errors.Is(err, tea.ErrProgramKilled):
		tell(sess, "gpumarket: "+err.Error())
		return 1
	}
	return 0
}

// register admits a session on c, or returns the refusal.
func (s *Server) register(st *session, c *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.refusalLocked(c); msg != "" {
		return msg
	}
	s.sessions[st] = struct{}{}
	if c != nil {
		c.sessions++ // c's place moves to its session; the timer then finds it and leaves c be
	}
	s.active.Add(1)
	return ""
}

// refusalLocked says why c may not take a place now, "" when it may.
func (s *Server) refusalLocked(c *conn) string {
	if s.closing {
		return msgShutdown
	}
	if max := s.opt.MaxSessions; max > 0 && s.placesLocked(c) >= max {
		s.log.Warn("refused: server full", "max_sessions", max, "sessions", len(s.sessions))
		return fullMessage(max)
	}
	return ""
}

func (s *Server) unregister(st *session, c *conn) {
	s.mu.Lock()
	delete(s.sessions, st)
	if c != nil {
		c.sessionEndedLocked(s.opt.NoSessionTimeout)
	}
	s.mu.Unlock()
	s.active.Done()
}

// watchIdle ends the session after d without typing, or returns when ctx ends.
func watchIdle(ctx context.Context, st *session, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, st.lastInput.Load()))
		if idle >= d {
			st.end(fmt.Sprintf("gpumarket: closed after %s without input", d))
			return
		}
		t.Reset(d - idle)
	}
}

type inputClock struct {
	r    io.Reader
	last *atomic.Int64
}

func (c inputClock) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// tell writes to stderr, which the client prints once the TUI is gone.
func tell(sess ssh.Session, msg string) {
	_, _ = io.WriteString(sess.Stderr(), "\r"+msg+"\r\n")
}

func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val // the last one wins, as in a shell
		}
	}
	return v
}
