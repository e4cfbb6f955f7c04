package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

// otherUser is a user id that is neither root nor the tests' user.
const otherUser = 65534

// needRoot skips a test that must chown a file to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user; run the tests as root to cover ownership")
	}
}

// safeDir is a fresh 0700 directory.
func safeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The issue-15 finding: a local user who can write authorized_keys (or
// its directory) gives themselves a booker session. Each way the file can
// be open to others is refused at start, naming the file and the fix.
func TestUnsafeAuthorizedKeysRefusedAtStart(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "alice")
	model := func(SessionInfo) tea.Model { return nil }
	for _, tc := range []struct {
		name  string
		root  bool
		setup func(t *testing.T, dir, ak string) string // returns the path to give New
		// want are parts of New's error (DIR and PATH stand for the
		// directory and the path given); none means accepted.
		want []string
	}{
		{name: "0600 in a 0700 directory is accepted", setup: func(t *testing.T, dir, ak string) string { return ak }},
		{name: "0644 is accepted (the file holds public keys)", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, ak, 0o644)
			return ak
		}},
		{name: "world-writable file", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, ak, 0o666)
			return ak
		}, want: []string{"PATH", "writable by its group and others (mode 0666)", "chmod go-w", "StrictModes"}},
		{name: "group-writable file", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, ak, 0o620)
			return ak
		}, want: []string{"writable by its group (mode 0620)"}},
		{name: "others-writable file", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, ak, 0o602)
			return ak
		}, want: []string{"writable by others (mode 0602)"}},
		{name: "directory writable by others", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, dir, 0o777)
			return ak
		}, want: []string{"a directory above", "mode 0777", "who could replace the file", "chmod go-w " + "DIR"}},
		{name: "directory writable by its group", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, dir, 0o770)
			return ak
		}, want: []string{"a directory above", "mode 0770"}},
		{name: "grandparent directory writable by others", setup: func(t *testing.T, dir, ak string) string {
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			moved := filepath.Join(sub, "authorized_keys")
			if err := os.Rename(ak, moved); err != nil {
				t.Fatal(err)
			}
			chmod(t, dir, 0o757)
			return moved
		}, want: []string{"a directory above", "mode 0757"}},
		{name: "sticky world-writable directory (like /tmp) is accepted", setup: func(t *testing.T, dir, ak string) string {
			chmod(t, dir, 0o777|os.ModeSticky)
			return ak
		}},
		{name: "symlink to a file in a writable directory", setup: func(t *testing.T, dir, ak string) string {
			open := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(open, 0o700); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(open, "ak")
			if err := os.Rename(ak, target); err != nil {
				t.Fatal(err)
			}
			chmod(t, open, 0o777)
			if err := os.Symlink(target, ak); err != nil {
				t.Fatal(err)
			}
			return ak
		}, want: []string{"a directory above", "mode 0777"}},
		{name: "not a regular file", setup: func(t *testing.T, dir, ak string) string {
			d := filepath.Join(dir, "akdir")
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			return d
		}, want: []string{"is not a regular file"}},
		{name: "owned by another user", root: true, setup: func(t *testing.T, dir, ak string) string {
			chown(t, ak, otherUser)
			return ak
		}, want: []string{"owned by user 65534", "chown"}},
		{name: "directory owned by another user", root: true, setup: func(t *testing.T, dir, ak string) string {
			chown(t, dir, otherUser)
			return ak
		}, want: []string{"owned by user 65534"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			dir := safeDir(t)
			ak := filepath.Join(dir, "authorized_keys")
			if err := os.WriteFile(ak, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := tc.setup(t, dir, ak)
			srv, err := New(Options{DataDir: safeDir(t), AuthorizedKeysPath: path, NewModel: model})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("New refused a safe file: %v", err)
				}
				if srv == nil {
					t.Fatal("New returned no server")
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted an authorized_keys file that others could change")
			}
			if !isUnsafe(err) {
				t.Errorf("err %v is not an UnsafeFileError", err)
			}
			for _, w := range tc.want {
				w = strings.ReplaceAll(strings.ReplaceAll(w, "DIR", dir), "PATH", path)
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// The reported attack, live: the server runs, the file becomes
// world-writable and a local user appends a booker key. Neither the
// intruder nor anyone else may log in (no fall-back to the last good
// copy: it was read from the same file), a session opened on an earlier
// connection is refused with a message, the operator reads it in the log
// once, and logins resume when the file is safe again.
func TestAuthorizedKeysBecameUnsafeRefusesEveryLogin(t *testing.T) {
	alice, aline := testutil.SSHKey(t, "", "alice")
	r := newRig(t, aline+"\n", rigOptions{})
	early := mustDial(t, r.addr(), alice) // authenticated while the file was safe

	mallory, mline := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "mallory")
	chmod(t, r.akPath, 0o666)
	if err := os.WriteFile(r.akPath, []byte(aline+"\n"+mline+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if c, err := dial(r.addr(), mallory); err == nil {
			c.Close()
			t.Fatalf("try %d: the intruder's key logged in through a world-writable authorized_keys", i)
		}
		if c, err := dial(r.addr(), alice); err == nil {
			c.Close()
			t.Fatalf("try %d: a key logged in from a world-writable authorized_keys (the last good copy must not be used)", i)
		}
	}
	sess, err := early.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	tm := testutil.StartShell(t, sess, waitFor)
	if st := tm.ExitStatus(t); st != 1 {
		t.Errorf("session on an earlier connection: exit %d, want 1", st)
	}
	if got := tm.Stderr(); !strings.Contains(got, "authorized keys file is unsafe") {
		t.Errorf("stderr %q, want the unsafe-file message", got)
	}
	if len(r.infos) != 0 {
		t.Errorf("%d sessions built from an unsafe file, want none", len(r.infos))
	}
	logs := r.logs.String()
	if n := strings.Count(logs, `level=ERROR msg="authorized keys file is unsafe`); n != 1 {
		t.Errorf("the log tells of the unsafe file %d times over seven refusals, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "chmod go-w "+r.akPath) {
		t.Errorf("the log lacks an error naming the fix:\n%s", logs)
	}

	// The operator removes the intruder and fixes the mode.
	if err := os.WriteFile(r.akPath, []byte(aline+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, r.akPath, 0o600)
	mustDial(t, r.addr(), alice)
	if c, err := dial(r.addr(), mallory); err == nil {
		c.Close()
		t.Error("the removed intruder logged in")
	}
	if !strings.Contains(r.logs.String(), "safe again") {
		t.Errorf("the log does not say logins resumed:\n%s", r.logs.String())
	}

	// A directory made writable is refused the same way.
	chmod(t, r.dir, 0o777)
	if c, err := dial(r.addr(), alice); err == nil {
		c.Close()
		t.Error("a key logged in while the file's directory was world-writable")
	}
	chmod(t, r.dir, 0o700)
	mustDial(t, r.addr(), alice)
}

// The host key proves the server to its users: one that others could
// read, change or replace is refused at start, as OpenSSH refuses it.
func TestUnsafeHostKeyRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  bool
		setup func(t *testing.T, dir, key string)
		want  string
	}{
		{name: "readable by others", setup: func(t *testing.T, dir, key string) { chmod(t, key, 0o644) }, want: "private key readable by others (mode 0644)"},
		{name: "readable by its group", setup: func(t *testing.T, dir, key string) { chmod(t, key, 0o640) }, want: "private key readable by others (mode 0640)"},
		{name: "writable by its group", setup: func(t *testing.T, dir, key string) { chmod(t, key, 0o620) }, want: "writable by its group"},
		{name: "in a world-writable directory", setup: func(t *testing.T, dir, key string) { chmod(t, dir, 0o777) }, want: "a directory above"},
		{name: "owned by another user", root: true, setup: func(t *testing.T, dir, key string) { chown(t, key, otherUser) }, want: "owned by user 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			dir := safeDir(t)
			key := filepath.Join(dir, HostKeyName)
			if _, err := LoadOrCreateHostKey(key, nil); err != nil {
				t.Fatalf("creating the key: %v", err)
			}
			tc.setup(t, dir, key)
			_, err := LoadOrCreateHostKey(key, nil)
			if err == nil || !isUnsafe(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "host key") {
				t.Errorf("err = %v, want an unsafe host key error saying %q", err, tc.want)
			}
		})
	}
}

func writeHostKey(t *testing.T, key any) string {
	t.Helper()
	block, err := gossh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(safeDir(t), "host_key")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// RSA-1024 host keys were accepted silently: now refused at
// start with the fix; strong keys of each kind are accepted.
func TestWeakHostKeyRefused(t *testing.T) {
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	path := writeHostKey(t, weak)
	_, err = LoadOrCreateHostKey(path, nil)
	for _, w := range []string{path, "RSA key of 1024 bits is too weak", "at least 2048", "ssh-keygen -t ed25519"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("RSA-1024 host key: err = %v, want it to say %q", err, w)
		}
	}
	_, line := testutil.SSHKey(t, "", "")
	dir := safeDir(t)
	akPath := filepath.Join(dir, "ak")
	if err := os.WriteFile(akPath, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{HostKeyPath: path, AuthorizedKeysPath: akPath, NewModel: func(SessionInfo) tea.Model { return nil }}); err == nil {
		t.Error("New started with an RSA-1024 host key")
	}

	strong, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]any{"RSA-2048": strong, "ECDSA P-256": ec} {
		if _, err := LoadOrCreateHostKey(writeHostKey(t, key), nil); err != nil {
			t.Errorf("%s host key refused: %v", name, err)
		}
	}
	if err := checkHostKeyStrength(dsaKey{}); err == nil || !strings.Contains(err.Error(), "DSA") {
		t.Errorf("DSA host key: err = %v, want a refusal naming DSA", err)
	}
}

// dsaKey is an ssh-dss public key as far as checkHostKeyStrength looks
// (generating real DSA parameters takes seconds).
type dsaKey struct{ gossh.PublicKey }

func (dsaKey) Type() string { return gossh.InsecureKeyAlgoDSA }

// Files and directories owned by root are trusted whoever runs the
// server, as in OpenSSH (/etc/gpumarket/authorized_keys, and every
// directory above a user's home). Run as root this cannot fail; run as
// another user it guards the "or root" of the owner check.
func TestRootOwnedIsTrusted(t *testing.T) {
	fi, err := os.Stat("/")
	if err != nil {
		t.Fatal(err)
	}
	if uid, ok := fileOwner(fi); !ok || uid != 0 {
		t.Skipf("/ is not owned by root here (%d, %v)", uid, ok)
	}
	if err := checkOwner("/", fi); err != nil {
		t.Errorf("root-owned / refused: %v", err)
	}
}
