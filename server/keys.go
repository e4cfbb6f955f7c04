package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

// Role is what a key may do in a session.
type Role string

// Roles. A key with no role is a viewer: least privilege unless someone
// said otherwise.
//
// Where a key's role comes from, first match wins:
//
//  1. config serve.roles, by the key's fingerprint, either way: the
//     operator's own file naming one key exactly is the most deliberate
//     word there is, so it may promote a viewer line and demote a booker
//     line;
//  2. the key's authorized_keys line: its environment="GPUMARKET_ROLE=…"
//     options and its gpumarket-role=… comment tokens. When they agree,
//     that role; when they disagree, viewer (least privilege), with a
//     warning in the log. Neither the option nor the comment is more
//     "explicit" than the other (both are text anyone who can edit the
//     line wrote), and an unclear grant must not be read as leave to
//     spend money: a mistaken viewer costs an edit, a mistaken booker
//     costs money;
//  3. otherwise viewer.
const (
	// RoleViewer sees everything and can spend nothing.
	RoleViewer Role = "viewer"
	// RoleBooker may book capacity blocks and launch fleets, within the
	// budget caps.
	RoleBooker Role = "booker"
)

// RoleForm is the accepted spelling of a role, for error messages.
const RoleForm = `"viewer" or "booker"`

// ParseRole reads a role as config and authorized_keys write it.
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case RoleViewer, RoleBooker:
		return r, nil
	}
	return "", fmt.Errorf("role %q: want %s", s, RoleForm)
}

// RoleEnv is the environment variable an authorized_keys line sets, with
// OpenSSH's own environment="..." option, to give its key a role:
//
//	environment="GPUMARKET_ROLE=booker" ssh-ed25519 AAAA... alice@laptop
//
// Using a real OpenSSH option keeps the file valid for ssh-keygen and sshd.
const RoleEnv = "GPUMARKET_ROLE"

// roleCommentPrefix marks a role given in the key's comment instead:
//
//	ssh-ed25519 AAAA... alice@laptop gpumarket-role=booker
const roleCommentPrefix = "gpumarket-role="

// refusedOptions are authorized_keys options that restrict who may log in
// or what they run. gpumarket cannot honour them, and ignoring them would
// grant more than the file's author meant, so a line carrying one is an
// error rather than silently widened.
var refusedOptions = map[string]bool{
	"cert-authority":  true,
	"command":         true,
	"expiry-time":     true,
	"from":            true,
	"principals":      true,
	"verify-required": true,
}

// AuthorizedKey is one key allowed to log in.
type AuthorizedKey struct {
	Key gossh.PublicKey
	// Fingerprint is "SHA256:…", as ssh-keygen -l prints it.
	Fingerprint string
	// Comment is the line's comment without any gpumarket-role= token
	// ("alice@laptop"); it names the person in the ledger.
	Comment string
	// Role is the role the file gives the key ("" when it gives none).
	Role Role
	// RoleConflict is set when the line gives both roles (its option
	// and its comment disagree, or two options do): Role is then viewer.
	RoleConflict bool
	// Line is the key's line number in the file, for messages.
	Line int
}

// ParseAuthorizedKeys reads an authorized_keys file. Blank lines and
// #-comments are skipped; any other line that is not a key, carries an
// option gpumarket cannot honour, or gives an unknown role is an error
// naming its line. When a key appears twice, the first line wins, as in
// sshd.
func ParseAuthorizedKeys(data []byte) ([]AuthorizedKey, error) {
	var keys []AuthorizedKey
	seen := map[string]bool{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		lineNo := n + 1
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, err := parseAuthorizedLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		k.Line = lineNo
		if seen[k.Fingerprint] {
			continue
		}
		seen[k.Fingerprint] = true
		keys = append(keys, k)
	}
	return keys, nil
}

func parseAuthorizedLine(line []byte) (AuthorizedKey, error) {
	key, comment, options, rest, err := gossh.ParseAuthorizedKey(line)
	if err != nil {
		return AuthorizedKey{}, fmt.Errorf("not an authorized key (want [options] TYPE BASE64 [comment]): %w", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return AuthorizedKey{}, fmt.Errorf("more than one key on the line")
	}
	if _, ok := key.(*gossh.Certificate); ok {
		return AuthorizedKey{}, fmt.Errorf("a certificate is not an authorized key; list the user's public key")
	}
	k := AuthorizedKey{Key: key, Fingerprint: gossh.FingerprintSHA256(key)}
	// Every role the line gives, from its options and its comment; see
	// Role for why disagreement means viewer.
	given := map[Role]bool{}
	for _, opt := range options {
		name, value, hasValue := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		if refusedOptions[name] {
			return AuthorizedKey{}, fmt.Errorf("option %q is not supported by gpumarket serve (it would be ignored and grant more than meant); remove it or the line", name)
		}
		if name != "environment" || !hasValue {
			continue // no-pty, restrict, permitopen…: nothing to grant here
		}
		v, err := unquoteOption(value)
		if err != nil {
			return AuthorizedKey{}, fmt.Errorf("option %s: %w", name, err)
		}
		envName, envValue, _ := strings.Cut(v, "=")
		if envName != RoleEnv {
			continue
		}
		r, err := ParseRole(envValue)
		if err != nil {
			return AuthorizedKey{}, fmt.Errorf("option environment=%q: %w", v, err)
		}
		given[r] = true
	}
	var words []string
	for _, w := range strings.Fields(comment) {
		if v, ok := strings.CutPrefix(strings.ToLower(w), roleCommentPrefix); ok {
			r, err := ParseRole(v)
			if err != nil {
				return AuthorizedKey{}, fmt.Errorf("comment %q: %w", w, err)
			}
			given[r] = true
			continue
		}
		words = append(words, w)
	}
	k.Comment = strings.Join(words, " ")
	switch {
	case len(given) > 1:
		k.Role, k.RoleConflict = RoleViewer, true
	case given[RoleBooker]:
		k.Role = RoleBooker
	case given[RoleViewer]:
		k.Role = RoleViewer
	}
	return k, nil
}

// unquoteOption reads an option value as sshd does: "..." with \" escapes.
func unquoteOption(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("value %s: want a double-quoted string", v)
	}
	return strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`), nil
}

// Why a key may not log in: not listed, or the file is unsafe to trust.
var (
	errNotListed  = errors.New("key not in the authorized keys file")
	errKeysUnsafe = errors.New("the authorized keys file is unsafe; every login is refused until it is fixed")
)

// keyring answers "may this key log in, and as what?" from the
// authorized_keys file, re-reading it on every question so that adding a
// workshop attendee needs no restart. The file is small; reading it per
// login costs less than watching it.
//
// A file that stops parsing, or is missing for an instant (an editor's
// rename), keeps the last good set and says why in the log. A file that
// becomes unsafe (see readTrusted) is different: someone else may have
// written it, and so may have written the last good set's successor too,
// so every login is refused until the file is safe again; the log says so
// once per change.
type keyring struct {
	path   string
	roles  map[string]Role // from config, by fingerprint; they win
	logger *slog.Logger

	mu     sync.Mutex
	data   []byte
	keys   map[string]AuthorizedKey
	bad    []byte // the last content that failed, so it is logged once
	unsafe string // the last unsafe verdict logged, "" while the file is safe
}

func newKeyring(path string, roles map[string]Role, logger *slog.Logger) (*keyring, error) {
	kr := &keyring{path: path, roles: roles, logger: logger}
	data, err := readTrusted(path, false)
	if isUnsafe(err) {
		return nil, fmt.Errorf("authorized keys: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("read authorized keys: %w", err)
	}
	if err := kr.load(data); err != nil {
		return nil, fmt.Errorf("authorized keys %s: %w", path, err)
	}
	if len(kr.keys) == 0 {
		logger.Warn("authorized keys file lists no key: nobody can log in until one is added", "path", path)
	}
	return kr, nil
}

func (kr *keyring) load(data []byte) error {
	keys, err := ParseAuthorizedKeys(data)
	if err != nil {
		return err
	}
	m := make(map[string]AuthorizedKey, len(keys))
	for _, k := range keys {
		if k.RoleConflict {
			kr.logger.Warn("authorized keys line gives both roles (viewer and booker); the key is a viewer until the line gives one",
				"path", kr.path, "line", k.Line, "fingerprint", k.Fingerprint)
		}
		if r, ok := kr.roles[k.Fingerprint]; ok {
			k.Role = r
		}
		if k.Role == "" {
			k.Role = RoleViewer
		}
		m[k.Fingerprint] = k
	}
	kr.data, kr.keys = data, m
	return nil
}

// lookup returns the authorized entry of key, reading the file anew. Its
// error is errNotListed, or wraps errKeysUnsafe.
func (kr *keyring) lookup(key gossh.PublicKey) (AuthorizedKey, error) {
	data, err := readTrusted(kr.path, false)
	kr.mu.Lock()
	defer kr.mu.Unlock()
	switch {
	case isUnsafe(err):
		if msg := err.Error(); msg != kr.unsafe {
			kr.unsafe = msg
			kr.logger.Error("authorized keys file is unsafe: refusing every login until it is fixed; check what it lists before making it safe again",
				"path", kr.path, "err", err)
		}
		return AuthorizedKey{}, fmt.Errorf("%w: %w", errKeysUnsafe, err)
	case err != nil:
		// A file being replaced (editor's rename) may be missing for an
		// instant; the last good set is the better answer than nobody.
		kr.logger.Warn("read authorized keys; using the last good copy", "path", kr.path, "err", err)
	default:
		if kr.unsafe != "" {
			kr.unsafe = ""
			kr.logger.Warn("authorized keys file is safe again: logins resume", "path", kr.path)
		}
		if !bytes.Equal(data, kr.data) && !bytes.Equal(data, kr.bad) {
			if err := kr.load(data); err != nil {
				kr.bad = data
				kr.logger.Warn("authorized keys changed but do not parse; using the last good copy", "path", kr.path, "err", err)
			} else {
				kr.bad = nil
				kr.logger.Info("authorized keys reloaded", "path", kr.path, "keys", len(kr.keys))
			}
		}
	}
	k, ok := kr.keys[gossh.FingerprintSHA256(key)]
	if !ok {
		return AuthorizedKey{}, errNotListed
	}
	return k, nil
}
