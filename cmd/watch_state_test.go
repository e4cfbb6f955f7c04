package cmd

import (
	"context"
	"database/sql"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/watch"
)

// randomBytes stands in for `head -c n /dev/urandom`, the same each run.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*193 + i/13 + 7)
	}
	return b
}

// damagedFiles are what a watch.db or history.db was found to be.
var damagedFiles = map[string]func(path string) error{
	"random bytes": func(p string) error { return os.WriteFile(p, randomBytes(20000), 0o600) },
	"a directory":  func(p string) error { return os.Mkdir(p, 0o700) },
	"emptied":      func(p string) error { return os.WriteFile(p, nil, 0o600) },
	"half of it": func(p string) error {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, b[:len(b)/2], 0o600)
	},
}

// warningsAbout returns stderr's warning lines that name file.
func warningsAbout(errOut, file string) []string {
	var out []string
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "gpumarket: warning: ") && strings.Contains(l, file) {
			out = append(out, l)
		}
	}
	return out
}

// A damaged watch.db made `watch` exit 1 ("file is not a database"),
// and systemd restarted it in a loop. It is one warning, moved aside,
// and the watch runs; an alert told before is not told again.
func TestWatchRunsOverADamagedState(t *testing.T) {
	for name, damage := range damagedFiles {
		t.Run(name, func(t *testing.T) {
			s := newSession(t, "watch:\n"+alwaysRule)
			if code, _, errOut := s.run("watch", "--once"); code != exitFired {
				t.Fatalf("first run: exit %d: %s", code, errOut)
			}
			path := filepath.Join(os.Getenv("GPUMARKET_DATA_DIR"), watch.StateFileName)
			for _, ext := range []string{"-wal", "-shm"} {
				os.Remove(path + ext)
			}
			if name != "half of it" {
				os.Remove(path)
			}
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := s.run("watch", "--once")
			if code != 0 || out != "" {
				t.Fatalf("over a damaged state: exit %d, stdout %q, stderr %s; want 0 and the alert not told again", code, out, errOut)
			}
			w := warningsAbout(errOut, path)
			if len(w) != 1 || !strings.Contains(w[0], "moved it to "+path+".corrupt-") {
				t.Fatalf("warnings %q; want one saying where the file went", w)
			}
			if code, _, errOut := s.run("watch", "--once"); code != 0 || len(warningsAbout(errOut, path)) != 0 {
				t.Fatalf("the next run: exit %d, %s; want 0 and no warning", code, errOut)
			}
		})
	}
}

// A watch state this gpumarket cannot use at all (a newer one) keeps
// alerts off with one warning; the TUI and serve still start, and so
// still end scheduled fleets.
func TestWatcherOffWhenTheStateCannotOpen(t *testing.T) {
	s := newSession(t, "watch:\n"+alwaysRule)
	if code, _, errOut := s.run("watch", "--once"); code != exitFired {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	path := filepath.Join(os.Getenv("GPUMARKET_DATA_DIR"), watch.StateFileName)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO migrations VALUES (99, 'later')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	e, _, errOut := testEnv(t, domain.Query{Providers: []string{"sim"}})
	e.Config, e.DataDir = cfg, os.Getenv("GPUMARKET_DATA_DIR")
	a := newCLI().appOf(context.Background(), e)
	defer a.Close()
	h, err := a.Hub(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := a.Booking(h.Providers(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := a.Watcher(h, svc)
	if err != nil || ev != nil {
		t.Fatalf("Watcher = %v, %v; want no evaluator and no error", ev, err)
	}
	if w := warningsAbout(errOut.String(), path); len(w) != 1 || !strings.Contains(w[0], "alerts are off in this run") || !strings.Contains(w[0], "upgrade gpumarket") {
		t.Fatalf("warnings %q", w)
	}
	// `watch` cannot do its one job: exit 1, which a restart of an
	// upgraded gpumarket cures, not 2.
	if code, _, errOut := s.run("watch", "--once"); code != exitFailure || !strings.Contains(errOut, "upgrade gpumarket") {
		t.Fatalf("watch over a newer state: exit %d, %s", code, errOut)
	}
}

// serve starts over a damaged watch.db, with one warning.
func TestServeRunsOverADamagedState(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "attendee")
	newSession(t, "watch:\n"+alwaysRule)
	dir := filepath.Dir(os.Getenv("GPUMARKET_DATA_DIR"))
	os.Chmod(dir, 0o700)
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(ak, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := os.Getenv("GPUMARKET_DATA_DIR")
	os.MkdirAll(dataDir, 0o700)
	path := filepath.Join(dataDir, watch.StateFileName)
	if err := damagedFiles["random bytes"](path); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testutil.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--listen", addr, "--authorized-keys", ak}, strings.NewReader(""), io.Discard, &logs)
	}()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(serveWait):
			t.Error("serve did not stop")
		}
	}()
	for deadline := time.Now().Add(serveWait); ; {
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d over a damaged watch.db: %s", code, logs.String())
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w := warningsAbout(logs.String(), path); len(w) != 1 {
		t.Fatalf("warnings %q in\n%s", w, logs.String())
	}
}

// A history.db that is a directory was met with "cache not used" at
// every start; it is moved aside once and the cache used after.
func TestHistoryDirMovedAsideOnce(t *testing.T) {
	s, _, _, dataDir := awsSession(t)
	os.MkdirAll(dataDir, 0o700)
	path := feed.Path(dataDir)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"prices", "--provider", "aws", "--region", "us-east-1", "--window", "24h", "-o", "json"}
	code, _, errOut := s.run(args...)
	if w := warningsAbout(errOut, path); code != 0 || len(w) != 1 || !strings.Contains(w[0], "is a directory") {
		t.Fatalf("exit %d, warnings %q", code, w)
	}
	code, _, errOut = s.run(args...)
	if w := warningsAbout(errOut, path); code != 0 || len(w) != 0 {
		t.Fatalf("second start: exit %d, warnings %q; want none", code, w)
	}
	if info, err := feed.Stat(context.Background(), dataDir); err != nil || info.Points == 0 {
		t.Fatalf("the cache is not used: %+v, %v", info, err)
	}
}
