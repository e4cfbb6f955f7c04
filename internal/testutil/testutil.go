// Package testutil holds the test helpers several packages' tests share.
package testutil

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"
)

// Buffer is a bytes.Buffer safe for concurrent writers: a log, a session's output.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// SSHKey makes an ed25519 client key and its authorized_keys line, with
// options before the key and comment after it when they are not "".
func SSHKey(t testing.TB, options, comment string) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, KeyLine(signer.PublicKey(), options, comment)
}

// KeyLine is the authorized_keys line of key.
func KeyLine(key gossh.PublicKey, options, comment string) string {
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key)))
	if options != "" {
		line = options + " " + line
	}
	if comment != "" {
		line += " " + comment
	}
	return line
}

// AWSEnv points the AWS SDK and the spot advisor at a fake EC2 endpoint
// (cloud/aws/ec2test) with throwaway credentials, reading no profile files.
func AWSEnv(t testing.TB, url string) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL", url)
	t.Setenv("AWS_ENDPOINT_URL_EC2", url)
	t.Setenv("GPUMARKET_AWS_ADVISOR_URL", url+"/spot-advisor-data.json")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
}

// Term is an SSH session's shell, its output read as it comes.
type Term struct {
	Sess        *gossh.Session
	in          io.WriteCloser
	out, errOut Buffer
	seen        int // bytes of text already consumed by WaitText
	wait        time.Duration
	done        chan error
}

// StartShell starts sess's shell (after any PTY request); waits last up to wait.
func StartShell(t testing.TB, sess *gossh.Session, wait time.Duration) *Term {
	t.Helper()
	tm := &Term{Sess: sess, wait: wait, done: make(chan error, 1)}
	sess.Stdout, sess.Stderr = &tm.out, &tm.errOut
	var err error
	if tm.in, err = sess.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatalf("shell: %v", err)
	}
	go func() { tm.done <- sess.Wait() }()
	return tm
}

// Raw is the output as sent; Text without its escape sequences.
func (tm *Term) Raw() string    { return tm.out.String() }
func (tm *Term) Text() string   { return ansi.Strip(tm.out.String()) }
func (tm *Term) Stderr() string { return tm.errOut.String() }

// WaitText waits for want in the text after what earlier waits consumed.
func (tm *Term) WaitText(t testing.TB, want string) {
	t.Helper()
	for deadline := time.Now().Add(tm.wait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		txt := tm.Text()
		if i := strings.Index(txt[min(tm.seen, len(txt)):], want); i >= 0 {
			tm.seen += i + len(want)
			return
		}
	}
	t.Fatalf("the screen never showed %q; it shows:\n%s\nstderr: %s", want, tm.Text(), tm.Stderr())
}

// WaitStderr waits until stderr holds want.
func (tm *Term) WaitStderr(t testing.TB, want string) {
	t.Helper()
	for deadline := time.Now().Add(tm.wait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(tm.Stderr(), want) {
			return
		}
	}
	t.Fatalf("stderr never said %q; it says %q", want, tm.Stderr())
}

// Press types keys.
func (tm *Term) Press(t testing.TB, keys string) {
	t.Helper()
	if _, err := io.WriteString(tm.in, keys); err != nil {
		t.Fatalf("type %q: %v", keys, err)
	}
}

// ExitStatus waits for the session to end and returns its exit status.
func (tm *Term) ExitStatus(t testing.TB) int {
	t.Helper()
	select {
	case err := <-tm.done:
		if err == nil {
			return 0
		}
		var ee *gossh.ExitError
		if errors.As(err, &ee) {
			return ee.ExitStatus()
		}
		t.Fatalf("session ended without a status: %v", err)
	case <-time.After(tm.wait):
		t.Fatal("session did not end")
	}
	return -1
}
