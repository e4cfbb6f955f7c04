package server

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

func TestParseAuthorizedKeys(t *testing.T) {
	_, a := testutil.SSHKey(t, "", "alice@laptop")
	_, b := testutil.SSHKey(t, `no-pty,environment="GPUMARKET_ROLE=booker",no-agent-forwarding`, "bob")
	_, c := testutil.SSHKey(t, "", "carol gpumarket-role=BOOKER on call")
	_, d := testutil.SSHKey(t, `environment="LANG=C"`, "")
	tests := []struct {
		name     string
		file     string
		roles    []Role
		comments []string
		err      string
	}{
		{name: "no role is empty (viewer later)", file: a, roles: []Role{""}, comments: []string{"alice@laptop"}},
		{name: "role option among others", file: b, roles: []Role{RoleBooker}, comments: []string{"bob"}},
		{name: "role in the comment, token removed", file: c, roles: []Role{RoleBooker}, comments: []string{"carol on call"}},
		{name: "other environment ignored", file: d, roles: []Role{""}, comments: []string{""}},
		{name: "blank lines, comments, CRLF", file: "# team\n\n" + a + "\r\n  # old key\n" + b + "\n",
			roles: []Role{"", RoleBooker}, comments: []string{"alice@laptop", "bob"}},
		{name: "duplicate: first wins", file: a + "\n" + strings.Replace(a, "alice@laptop", "gpumarket-role=booker", 1),
			roles: []Role{""}, comments: []string{"alice@laptop"}},
		{name: "garbage line named", file: a + "\nhello world\n", err: "line 2: not an authorized key"},
		{name: "unknown role in option", file: `environment="GPUMARKET_ROLE=admin" ` + strings.TrimPrefix(a, ""), err: `line 1: option environment="GPUMARKET_ROLE=admin": role "admin": want "viewer" or "booker"`},
		{name: "unknown role in comment", file: a + " gpumarket-role=root", err: `role "root": want "viewer" or "booker"`},
		{name: "from= refused", file: `from="10.0.0.0/8" ` + a, err: `line 1: option "from" is not supported`},
		{name: "command= refused", file: `command="/bin/sh" ` + a, err: `option "command" is not supported`},
		{name: "cert-authority refused", file: `cert-authority ` + a, err: `option "cert-authority" is not supported`},
		{name: "certificate refused", file: certLine(t), err: "line 1: a certificate is not an authorized key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ParseAuthorizedKeys([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != len(tc.roles) {
				t.Fatalf("got %d keys, want %d", len(keys), len(tc.roles))
			}
			for i, k := range keys {
				if k.Role != tc.roles[i] || k.Comment != tc.comments[i] {
					t.Errorf("key %d: role %q comment %q, want %q %q", i, k.Role, k.Comment, tc.roles[i], tc.comments[i])
				}
				if !strings.HasPrefix(k.Fingerprint, "SHA256:") {
					t.Errorf("key %d: fingerprint %q", i, k.Fingerprint)
				}
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	for in, want := range map[string]Role{"viewer": RoleViewer, " Booker ": RoleBooker} {
		if got, err := ParseRole(in); err != nil || got != want {
			t.Errorf("ParseRole(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "admin", "book"} {
		if _, err := ParseRole(in); err == nil || !strings.Contains(err.Error(), RoleForm) {
			t.Errorf("ParseRole(%q) err = %v, want one naming %s", in, err, RoleForm)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "")
	dir := t.TempDir()
	ak := dir + "/ak"
	if err := os.WriteFile(ak, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	model := func(SessionInfo) tea.Model { return nil }
	for _, tc := range []struct {
		name string
		opt  Options
		err  string
	}{
		{"no authorized keys", Options{DataDir: dir, NewModel: model}, "--authorized-keys"},
		{"missing file", Options{DataDir: dir, AuthorizedKeysPath: dir + "/nope", NewModel: model}, "read authorized keys"},
		{"role not a fingerprint", Options{DataDir: dir, AuthorizedKeysPath: ak, NewModel: model, Roles: map[string]string{"alice": "booker"}}, "want a fingerprint SHA256:"},
		{"unknown role", Options{DataDir: dir, AuthorizedKeysPath: ak, NewModel: model, Roles: map[string]string{"SHA256:x": "admin"}}, `want "viewer" or "booker"`},
		{"negative max", Options{DataDir: dir, AuthorizedKeysPath: ak, NewModel: model, MaxSessions: -1}, "max sessions -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opt); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("New err = %v, want it to contain %q", err, tc.err)
			}
		})
	}
}

func FuzzParseAuthorizedKeys(f *testing.F) {
	f.Add([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGbm2Y7nQ2Sx3K0h0t1yQkQ0cX0v0P1w5q6mJb9sVnQe alice gpumarket-role=booker\n"))
	f.Add([]byte(`environment="GPUMARKET_ROLE=viewer",no-pty ssh-ed25519 AAAA x`))
	f.Add([]byte("# c\n\n\r\n"))
	f.Add([]byte(`from="*" ssh-rsa AAAA`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseAuthorizedKeys(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("error does not name its line: %v", err)
			}
			return
		}
		for _, k := range keys {
			if k.Key == nil || k.Role != "" && k.Role != RoleViewer && k.Role != RoleBooker || k.Line < 1 {
				t.Errorf("bad entry %+v", k)
			}
		}
	})
}

// certLine is an authorized_keys line holding a user certificate rather
// than a key: gpumarket does not check certificates (their principals,
// validity, CA), so it must refuse them rather than trust the key inside.
func certLine(t *testing.T) string {
	t.Helper()
	ca, _ := testutil.SSHKey(t, "", "")
	user, _ := testutil.SSHKey(t, "", "")
	cert := &gossh.Certificate{Key: user.PublicKey(), CertType: gossh.UserCert,
		ValidPrincipals: []string{"alice"}, ValidBefore: gossh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(cert))) + " alice"
}
