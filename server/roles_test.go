package server

import (
	"fmt"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

// TestRolePrecedence logs in with a key for every combination of the
// three places a role can come from: config serve.roles (by fingerprint),
// the line's environment="GPUMARKET_ROLE=…" option and its
// gpumarket-role=… comment. The rule (keys.go, README): the config wins
// either way; else the line's roles, viewer when they disagree; else
// viewer. The table is written out, not computed, so it states the rule
// rather than repeats the code.
func TestRolePrecedence(t *testing.T) {
	const (
		v = RoleViewer
		b = RoleBooker
	)
	tests := []struct {
		config, option, comment Role
		want                    Role
	}{
		// no config role: the line decides
		{"", "", "", v},
		{"", "", v, v},
		{"", "", b, b},
		{"", v, "", v},
		{"", v, v, v},
		{"", v, b, v}, // disagree: least privilege
		{"", b, "", b},
		{"", b, v, v}, // disagree: least privilege
		{"", b, b, b},
		// config viewer: always viewer
		{v, "", "", v},
		{v, "", v, v},
		{v, "", b, v},
		{v, v, "", v},
		{v, v, v, v},
		{v, v, b, v},
		{v, b, "", v},
		{v, b, v, v},
		{v, b, b, v},
		// config booker: always booker
		{b, "", "", b},
		{b, "", v, b},
		{b, "", b, b},
		{b, v, "", b},
		{b, v, v, b},
		{b, v, b, b},
		{b, b, "", b},
		{b, b, v, b},
		{b, b, b, b},
	}
	type login struct {
		name string
		key  gossh.Signer
		want Role
	}
	var logins []login
	var lines []string
	roles := map[string]string{}
	for i, tc := range tests {
		opt, comment := "", fmt.Sprintf("k%d", i)
		if tc.option != "" {
			opt = fmt.Sprintf(`environment="GPUMARKET_ROLE=%s"`, tc.option)
		}
		if tc.comment != "" {
			comment += " gpumarket-role=" + string(tc.comment)
		}
		key, line := testutil.SSHKey(t, opt, comment)
		if tc.config != "" {
			roles[gossh.FingerprintSHA256(key.PublicKey())] = string(tc.config)
		}
		lines = append(lines, line)
		logins = append(logins, login{
			name: fmt.Sprintf("config=%q option=%q comment=%q", tc.config, tc.option, tc.comment),
			key:  key, want: tc.want,
		})
	}
	r := newRig(t, strings.Join(lines, "\n")+"\n", rigOptions{roles: roles})
	count := map[Role]int{}
	for _, l := range logins {
		tm := openTerm(t, mustDial(t, r.addr(), l.key), 80, 24, nil)
		tm.WaitText(t, "role=")
		info := <-r.infos
		if info.Role != l.want {
			t.Errorf("%s: session role %q, want %q", l.name, info.Role, l.want)
		}
		tm.Press(t, "b")
		if l.want == RoleBooker {
			tm.WaitText(t, "BOOKED-BY-")
		} else {
			tm.WaitText(t, "READ-ONLY-SESSION")
		}
		count[l.want]++
	}
	if n := r.booker.calls.Load(); n != int64(count[RoleBooker]) {
		t.Errorf("%d purchases, want %d (one per booker)", n, count[RoleBooker])
	}
	// The operator is told of each line that disagrees with itself: the
	// two such lines without a config role, and the four with one (the
	// line is still unclear, even if the config settles it).
	if n := strings.Count(r.logs.String(), "gives both roles"); n != 6 {
		t.Errorf("the log warns of %d self-contradicting lines, want 6:\n%s", n, r.logs.String())
	}
}

// Several role options or comment tokens on one line follow the same
// rule: all agree, or viewer.
func TestRoleConflictWithinOneSource(t *testing.T) {
	_, twoOpts := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker",environment="GPUMARKET_ROLE=viewer"`, "")
	_, twoComments := testutil.SSHKey(t, "", "gpumarket-role=booker x gpumarket-role=viewer")
	_, same := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "gpumarket-role=BOOKER")
	for _, tc := range []struct {
		line     string
		role     Role
		conflict bool
	}{{twoOpts, RoleViewer, true}, {twoComments, RoleViewer, true}, {same, RoleBooker, false}} {
		keys, err := ParseAuthorizedKeys([]byte(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if k := keys[0]; k.Role != tc.role || k.RoleConflict != tc.conflict {
			t.Errorf("%q: role %q conflict %v, want %q %v", tc.line, k.Role, k.RoleConflict, tc.role, tc.conflict)
		}
	}
}
