package server_test

// The load measurement: a hundred SSH sessions of the real TUI
// over the real simulated market (766 pools), in one process with their
// clients. Run it with
//
//	go test -run XXX -bench Serve100 -benchtime 20x ./server/
//
// It imports tui, which the server package itself must not: the test is
// the one place that sees both, as cmd does.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/server"
	"github.com/gpumarket/gpumarket/tui"
)

const loadSessions = 100

// roundModel wraps a session's model to see when it took a new snapshot
// (for the benchmark's rounds) and how many frames it drew.
type roundModel struct {
	tea.Model
	round  *atomic.Int64 // the benchmark's current round
	seen   atomic.Int64  // the round in force when this model last took a snapshot
	frames *atomic.Int64
}

func (m *roundModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if fmt.Sprintf("%T", msg) == "tui.snapshotMsg" {
		m.seen.Store(m.round.Load())
	}
	inner, cmd := m.Model.Update(msg)
	m.Model = inner
	return m, cmd
}

func (m *roundModel) View() tea.View {
	m.frames.Add(1)
	return m.Model.View()
}

// staticModel is a session that draws one line and watches nothing: the
// cost of the SSH connection, the program and the client, without a TUI.
type staticModel struct{}

func (staticModel) Init() tea.Cmd { return nil }
func (staticModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	return staticModel{}, nil
}
func (staticModel) View() tea.View { return tea.NewView("SIMULATED MARKET (static)") }

// markerWriter counts bytes and notes when a marker has gone by, keeping
// only a short tail so a hundred clients hold little.
type markerWriter struct {
	mu     sync.Mutex
	tail   []byte
	marker []byte
	found  chan struct{}
	bytes  *atomic.Int64
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.marker == nil {
		return len(p), nil
	}
	w.tail = append(w.tail, p...)
	if bytes.Contains(w.tail, w.marker) {
		close(w.found)
		w.marker, w.tail = nil, nil
		return len(p), nil
	}
	if keep := len(w.marker) * 4; len(w.tail) > keep {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-keep:]...)
	}
	return len(p), nil
}

func memInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServe100Sessions: one op is one market update (fifteen minutes
// of the simulated market) drawn by all hundred sessions. Reported:
// heap+stack bytes per session (server and its in-process client), CPU
// per session-frame, bytes on the wire per frame.
func BenchmarkServe100Sessions(b *testing.B) {
	for _, kind := range []string{"tui", "static"} {
		b.Run(kind, func(b *testing.B) { benchSessions(b, kind == "tui") })
	}
}

func benchSessions(b *testing.B, realTUI bool) {
	dir := b.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := gossh.NewSignerFromKey(priv)
	ak := filepath.Join(dir, "ak")
	if err := os.WriteFile(ak, gossh.MarshalAuthorizedKey(key.PublicKey()), 0o600); err != nil {
		b.Fatal(err)
	}

	var step atomic.Int64
	base := time.Now().Truncate(time.Hour)
	clock := func() time.Time { return base.Add(time.Duration(step.Load()) * 15 * time.Minute) }
	h := feed.New([]domain.Provider{sim.New(sim.Options{Seed: 1, Now: clock})}, feed.Options{
		Interval:     func(string) time.Duration { return time.Hour },
		PublishEvery: 20 * time.Millisecond,
		Now:          clock,
	})
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { h.Run(ctx); close(hubDone) }()
	defer func() { cancel(); <-hubDone }()
	if _, err := h.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}

	var round, frames atomic.Int64
	var mu sync.Mutex
	var models []*roundModel
	shared := tui.NewShared() // one per process, as cmd's serve makes it
	srv, err := server.New(server.Options{
		DataDir: dir, AuthorizedKeysPath: ak, Hub: h, MaxSessions: loadSessions,
		NewModel: func(info server.SessionInfo) tea.Model {
			if !realTUI {
				return staticModel{}
			}
			m := &roundModel{round: &round, frames: &frames, Model: tui.New(tui.Options{
				Hub: h, Role: tui.RoleViewer, Actor: info.Actor, Context: info.Context, Now: clock,
				Shared: shared,
			})}
			mu.Lock()
			models = append(models, m)
			mu.Unlock()
			return m
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	before := memInUse()
	var wire atomic.Int64
	clients := make([]*gossh.Client, loadSessions)
	for i := range clients {
		c, err := gossh.Dial("tcp", ln.Addr().String(), &gossh.ClientConfig{
			User: "load", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		})
		if err != nil {
			b.Fatalf("client %d: %v", i, err)
		}
		clients[i] = c
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		w := &markerWriter{marker: []byte("SIMULATED"), found: make(chan struct{}), bytes: &wire}
		sess.Stdout, sess.Stderr = w, io.Discard
		if _, err := sess.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		if err := sess.RequestPty("xterm-256color", 40, 120, gossh.TerminalModes{}); err != nil {
			b.Fatal(err)
		}
		if err := sess.Shell(); err != nil {
			b.Fatal(err)
		}
		select {
		case <-w.found:
		case <-time.After(30 * time.Second):
			b.Fatalf("session %d never showed the market", i)
		}
	}
	perSession := float64(int64(memInUse())-int64(before)) / loadSessions
	if !realTUI {
		b.ReportMetric(perSession, "mem-B/session")
		return // the static sessions draw no market updates
	}
	if n := h.Subscribers(); n != loadSessions {
		b.Fatalf("hub subscribers %d, want %d", n, loadSessions)
	}

	frames.Store(0)
	wire.Store(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := round.Add(1)
		step.Add(1)
		h.Refresh()
		deadline := time.Now().Add(30 * time.Second)
		for {
			done := 0
			mu.Lock()
			for _, m := range models {
				if m.seen.Load() >= r {
					done++
				}
			}
			mu.Unlock()
			if done == loadSessions {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("round %d: %d of %d sessions took the update", r, done, loadSessions)
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(perSession, "mem-B/session") // after the loop: ResetTimer clears metrics
	f := frames.Load()
	if f > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(f), "cpu-ns/frame")
		b.ReportMetric(float64(wire.Load())/float64(f), "wire-B/frame")
		b.ReportMetric(float64(f)/float64(b.N), "frames/op")
	}
	if srv.Sessions() != loadSessions {
		b.Errorf("sessions %d, want %d", srv.Sessions(), loadSessions)
	}
}
