package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

// waitFor bounds every wait in these tests. It is a ceiling against a hung
// test, not a performance assertion.
const waitFor = 15 * time.Second

// countingSource is a fake market source named "sim" (so snapshots say
// SIMULATED MARKET) that counts its fetches.
type countingSource struct {
	fetches atomic.Int64
}

func (c *countingSource) Name() string { return "sim" }

// Describe says it is simulated, as the market it stands in for is.
func (c *countingSource) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "sim", Simulated: true}
}

func (c *countingSource) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	n := c.fetches.Add(1)
	key := domain.PoolKey{Provider: "sim", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}
	sink(domain.Event{
		Region: "us-east-1",
		Pools:  []domain.Pool{{Provider: "sim", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}},
		Points: []domain.PricePoint{{Pool: key, At: req.Until, USDHour: 30 + float64(n)}},
	})
	return nil
}

// fakeBooker counts purchases; a viewer's session must leave it at zero.
type fakeBooker struct{ calls atomic.Int64 }

// testModel is a small stand-in for the TUI with the behaviour the server
// must carry: a hub subscription under the session context, the role, the
// window size, a booking key, a key that panics.
type testModel struct {
	info   SessionInfo
	hub    *feed.Hub
	booker *fakeBooker
	sub    <-chan *feed.Snapshot
	snap   *feed.Snapshot
	width  int
	status string
	typed  string
	// lastSeq is the Seq of the newest snapshot the model took, read by
	// tests from their own goroutine.
	lastSeq atomic.Uint64
}

type snapMsg struct{ s *feed.Snapshot }

func newTestModel(info SessionInfo, h *feed.Hub, b *fakeBooker) *testModel {
	return &testModel{info: info, hub: h, booker: b, sub: h.Subscribe(info.Context), width: info.Width}
}

func (m *testModel) wait() tea.Cmd {
	sub := m.sub
	return func() tea.Msg {
		s, ok := <-sub
		if !ok {
			return nil
		}
		return snapMsg{s}
	}
}

func (m *testModel) Init() tea.Cmd { return m.wait() }

func (m *testModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case snapMsg:
		m.snap = msg.s
		m.lastSeq.Store(msg.s.Seq)
		return m, m.wait()
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tea.KeyPressMsg:
		switch k := msg.String(); k {
		case "q":
			return m, tea.Quit
		case "P":
			panic("test model told to panic")
		case "b":
			if m.info.Role != RoleBooker {
				m.status = "READ-ONLY-SESSION"
			} else {
				m.booker.calls.Add(1)
				m.status = "BOOKED-BY-" + strings.ReplaceAll(m.info.Comment, " ", "_")
			}
		default:
			m.typed += k
		}
	}
	return m, nil
}

func (m *testModel) View() tea.View {
	var b strings.Builder
	if m.snap != nil && m.snap.Simulated() && len(m.snap.Pools) > 0 {
		b.WriteString("SIMULATED MARKET\n")
		fmt.Fprintf(&b, "pools=%d\n", len(m.snap.Pools))
	} else {
		b.WriteString("loading\n")
	}
	fmt.Fprintf(&b, "role=%s\n", m.info.Role)
	fmt.Fprintf(&b, "cols=%d\n", m.width)
	fmt.Fprintf(&b, "typed=%s\n", m.typed)
	b.WriteString(m.status)
	v := tea.NewView(b.String())
	v.AltScreen = true
	return v
}

// rig is a server on 127.0.0.1:0 over a hub of a counting source.
type rig struct {
	t       *testing.T
	dir     string
	akPath  string
	srv     *Server
	hub     *feed.Hub
	source  *countingSource
	booker  *fakeBooker
	infos   chan SessionInfo
	serveCh chan error
	cancel  context.CancelFunc
	stop    func()
	started time.Time

	logs   *testutil.Buffer
	timers *fakeTimers // set when rigOptions.fakeTimers

	mu   sync.Mutex
	hook func(*testModel)
}

// newModelHook sees every test model the server builds from now on.
func (r *rig) newModelHook(f func(*testModel)) {
	r.mu.Lock()
	r.hook = f
	r.mu.Unlock()
}

type rigOptions struct {
	interval    time.Duration
	idle        time.Duration
	maxSessions int
	roles       map[string]string
	newModel    func(SessionInfo, *feed.Hub) tea.Model
	drain       func(context.Context) error
	dataDir     string
	noSession   time.Duration
	// fakeTimers replaces the no-session timers with ones the test
	// fires (rig.timers.fireAll), so no test races the clock.
	fakeTimers bool
}

// fakeTimers stand in for the connections' no-session timers.
type fakeTimers struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	mu      sync.Mutex
	f       func()
	pending bool
}

func (ft *fakeTimer) Reset(time.Duration) bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	was := ft.pending
	ft.pending = true
	return was
}

func (ft *fakeTimer) Stop() bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	was := ft.pending
	ft.pending = false
	return was
}

func (fs *fakeTimers) afterFunc(_ time.Duration, f func()) connTimer {
	ft := &fakeTimer{f: f, pending: true}
	fs.mu.Lock()
	fs.timers = append(fs.timers, ft)
	fs.mu.Unlock()
	return ft
}

// fireAll lets the no-session timeout pass for every connection: each
// timer still pending fires, once.
func (fs *fakeTimers) fireAll() {
	fs.mu.Lock()
	timers := append([]*fakeTimer(nil), fs.timers...)
	fs.mu.Unlock()
	for _, ft := range timers {
		ft.mu.Lock()
		fire := ft.pending
		ft.pending = false
		ft.mu.Unlock()
		if fire {
			ft.f()
		}
	}
}

func newRig(t *testing.T, authorized string, ro rigOptions) *rig {
	t.Helper()
	if ro.interval == 0 {
		ro.interval = time.Hour
	}
	dir := t.TempDir()
	// The server refuses an authorized_keys file in a directory others
	// may write, which t.TempDir's can be under a umask of 002.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(ak, []byte(authorized), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, akPath: ak, source: &countingSource{}, booker: &fakeBooker{},
		infos: make(chan SessionInfo, 200), serveCh: make(chan error, 1), logs: &testutil.Buffer{}}
	r.hub = feed.New([]domain.Provider{r.source}, feed.Options{
		Interval:     func(string) time.Duration { return ro.interval },
		PublishEvery: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	hubDone := make(chan struct{})
	r.started = time.Now()
	go func() { r.hub.Run(ctx); close(hubDone) }()

	if ro.dataDir == "" {
		ro.dataDir = filepath.Join(dir, "data")
	}
	newModel := ro.newModel
	if newModel == nil {
		newModel = func(info SessionInfo, h *feed.Hub) tea.Model {
			m := newTestModel(info, h, r.booker)
			r.mu.Lock()
			hook := r.hook
			r.mu.Unlock()
			if hook != nil {
				hook(m)
			}
			return m
		}
	}
	srv, err := New(Options{
		DataDir:            ro.dataDir,
		AuthorizedKeysPath: ak,
		Roles:              ro.roles,
		IdleTimeout:        ro.idle,
		MaxSessions:        ro.maxSessions,
		NoSessionTimeout:   ro.noSession,
		Logger:             slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hub:                r.hub,
		Drain:              ro.drain,
		ShutdownTimeout:    waitFor,
		NewModel: func(info SessionInfo) tea.Model {
			r.infos <- info
			return newModel(info, r.hub)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	if ro.fakeTimers {
		r.timers = &fakeTimers{}
		srv.afterFunc = r.timers.afterFunc // before Serve: no connection yet
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { r.serveCh <- srv.Serve(ctx, ln) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-r.serveCh:
			case <-time.After(waitFor):
				t.Error("server did not stop")
			}
			<-hubDone
		})
	}
	t.Cleanup(r.stop)
	return r
}

func (r *rig) addr() string {
	for i := 0; i < 1000; i++ {
		if a := r.srv.Addr(); a != nil {
			return a.String()
		}
		time.Sleep(time.Millisecond)
	}
	r.t.Fatal("server never listened")
	return ""
}

// newKey makes a client key and its authorized_keys line (without a
// newline; prefix and suffix are options and comment).
// newKeyFile makes a client key as OpenSSH's ssh reads it (a 0600
// private key file) and its authorized_keys line.
func newKeyFile(t *testing.T, options, comment string) (path, line string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return path, testutil.KeyLine(signer.PublicKey(), options, comment)
}

func dial(addr string, signer gossh.Signer) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "tester",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Timeout:         waitFor,
	})
}

func mustDial(t *testing.T, addr string, signer gossh.Signer) *gossh.Client {
	t.Helper()
	c, err := dial(addr, signer)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openTerm(t *testing.T, c *gossh.Client, w, h int, env map[string]string) *testutil.Term {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	for k, v := range env {
		if err := sess.Setenv(k, v); err != nil {
			t.Fatalf("setenv %s: %v", k, err)
		}
	}
	if err := sess.RequestPty("xterm-256color", h, w, gossh.TerminalModes{}); err != nil {
		t.Fatalf("request pty: %v", err)
	}
	return testutil.StartShell(t, sess, waitFor)
}

// eventually polls cond until it holds, bounded by waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// Addr is the address listened on once Serve started; nil before.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.listeners) == 0 {
		return nil
	}
	return s.listeners[0].Addr()
}
