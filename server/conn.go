package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"charm.land/ssh"
	gossh "golang.org/x/crypto/ssh"
)

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
