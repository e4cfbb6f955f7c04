package server

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

type Role string

// Roles; where a key's comes from is in docs/DESIGN.md ("Serving over SSH").
const (
	RoleViewer Role = "viewer"
	RoleBooker Role = "booker"
)

// RoleForm is the accepted spelling of a role, for messages.
const RoleForm = `"viewer" or "booker"`

func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case RoleViewer, RoleBooker:
		return r, nil
	}
	return "", fmt.Errorf("role %q: want %s", s, RoleForm)
}

// RoleEnv is set with OpenSSH's own environment="..." option, so the file stays valid for sshd.
const RoleEnv = "GPUMARKET_ROLE"

// roleCommentPrefix gives a role in the key's comment instead.
const roleCommentPrefix = "gpumarket-role="

// refusedOptions restrict a login; ignoring them would grant more than meant.
var refusedOptions = []string{"cert-authority", "command", "expiry-time", "from", "principals", "verify-required"}

type AuthorizedKey struct {
	Key         gossh.PublicKey
	Fingerprint string
	// Comment names the person in the ledger ("alice@laptop").
	Comment string
	// Role is what the line gives ("" for none).
	Role Role
	// RoleConflict: the line gives both roles, so Role is viewer.
	RoleConflict bool
	Line         int
}

// ParseAuthorizedKeys reads an authorized_keys file; a bad line is an error
// naming it, and the first line of a key wins, as in sshd.
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
	given := map[Role]bool{}
	for _, opt := range options {
		name, value, hasValue := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		if slices.Contains(refusedOptions, name) {
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
	for r := range given {
		k.Role = r
	}
	if len(given) > 1 {
		k.Role, k.RoleConflict = RoleViewer, true
	}
	return k, nil
}

func unquoteOption(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("value %s: want a double-quoted string", v)
	}
	return strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`), nil
}

var (
	errNotListed  = errors.New("key not in the authorized keys file")
	errKeysUnsafe = errors.New("the authorized keys file is unsafe; every login is refused until it is fixed")
)

// keyring answers "may this key log in, and as what?", re-reading the file at
// every login; it keeps the last good set unless the file became unsafe.
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

// lookup returns key's entry; its error is errNotListed or wraps errKeysUnsafe.
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
		// A file being replaced may be missing for an instant.
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

const HostKeyName = "ssh_host_ed25519_key"

// LoadOrCreateHostKey reads the host key at path, creating an ed25519 one the
// first time; unsafe files and weak keys are refused (docs/DESIGN.md).
func LoadOrCreateHostKey(path string, logger *slog.Logger) (gossh.Signer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createHostKey(path); err != nil {
			return nil, fmt.Errorf("host key %s: %w", path, err)
		}
		logger.Info("created SSH host key", "path", path)
	}
	data, err := readTrusted(path, true)
	if isUnsafe(err) {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	signer, err := gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("host key %s: want an unencrypted OpenSSH or PEM private key: %w", path, err)
	}
	if err := checkHostKeyStrength(signer.PublicKey()); err != nil {
		return nil, fmt.Errorf("host key %s: %w; remove the file to have gpumarket create an ed25519 key there, or make one with ssh-keygen -t ed25519 -N '' -f %s", path, err, path)
	}
	return signer, nil
}

// minRSABits: RSA-1024 is below NIST SP 800-131A since 2013.
const minRSABits = 2048

// checkHostKeyStrength refuses RSA under minRSABits and DSA: a warning would scroll past.
func checkHostKeyStrength(pub gossh.PublicKey) error {
	switch pub.Type() {
	case gossh.InsecureKeyAlgoDSA:
		return errors.New("a DSA key is too weak (1024 bits; OpenSSH no longer accepts DSA); want ed25519, ECDSA or RSA of at least 2048 bits")
	case gossh.KeyAlgoRSA:
		if ck, ok := pub.(gossh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
				return fmt.Errorf("an RSA key of %d bits is too weak; want ed25519, ECDSA or RSA of at least %d bits", rk.N.BitLen(), minRSABits)
			}
		}
	}
	return nil
}

// createHostKey uses O_EXCL: of two servers starting at once, the loser reads the winner's key.
func createHostKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generate ed25519 key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "gpumarket host key")
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	data := pem.EncodeToMemory(block)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// maxTrustedFile keeps a huge file out of memory at every login.
const maxTrustedFile = 4 << 20

// UnsafeFileError is a trusted file others could change (or read, a secret), with the fix.
type UnsafeFileError struct {
	Path string
	Why  string
	Fix  string
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("%s %s; gpumarket refuses it, as OpenSSH's StrictModes does (fix: %s)", e.Path, e.Why, e.Fix)
}

// readTrusted reads a file only nobody but us or root can change, checking the
// open file so no swap slips in; secret also refuses one others can read.
func readTrusted(path string, secret bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkTrustedFile(path, fi, secret); err != nil {
		return nil, err
	}
	if err := checkTrustedDirs(path); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTrustedFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTrustedFile {
		return nil, fmt.Errorf("%s is larger than %d MiB; want an authorized_keys or key file", path, maxTrustedFile>>20)
	}
	return data, nil
}

func checkTrustedFile(path string, fi fs.FileInfo, secret bool) error {
	if !fi.Mode().IsRegular() {
		return &UnsafeFileError{Path: path, Why: "is not a regular file", Fix: "point the setting at a regular file"}
	}
	if err := checkOwner(path, fi); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is writable by %s (mode %04o)", whoWrites(perm), perm),
			Fix: "chmod go-w " + path + ", then check that it holds only the keys you listed"}
	}
	if secret && perm&0o077 != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is a private key readable by others (mode %04o)", perm),
			Fix: "chmod 600 " + path}
	}
	return nil
}

// checkTrustedDirs checks every directory above the file, as written and as
// its links resolve; a sticky one lets no one else swap our entry.
func checkTrustedDirs(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	paths := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				return fmt.Errorf("check directory %s: %w", dir, err)
			}
			if err := checkOwner(dir, fi); err != nil {
				return err
			}
			if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
				return &UnsafeFileError{Path: dir, Why: fmt.Sprintf("(a directory above %s) is writable by %s (mode %04o), who could replace the file", path, whoWrites(perm), perm),
					Fix: "chmod go-w " + dir}
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	return nil
}

// checkOwner refuses an owner other than us or root, where owners exist.
func checkOwner(path string, fi fs.FileInfo) error {
	uid, ok := fileOwner(fi)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); uid != me && uid != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is owned by user %d, not by the server's user (%d) or root", uid, me),
			Fix: fmt.Sprintf("chown %d %s (or use a file of your own)", me, path)}
	}
	return nil
}

func whoWrites(perm fs.FileMode) string {
	switch {
	case perm&0o022 == 0o022:
		return "its group and others"
	case perm&0o002 != 0:
		return "others"
	}
	return "its group"
}

func isUnsafe(err error) bool {
	var ue *UnsafeFileError
	return errors.As(err, &ue)
}
