package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	gossh "golang.org/x/crypto/ssh"
)

// HostKeyName is the host key's file name in the data dir.
const HostKeyName = "ssh_host_ed25519_key"

// LoadOrCreateHostKey reads the server's host key from path, creating an
// ed25519 key there (mode 0600, directory 0700) the first time. Keeping
// the key across restarts is what spares clients the "host key changed"
// warning.
//
// A key file that others may read or change, in a directory others may
// write, is refused (an *UnsafeFileError, see readTrusted), as is a weak
// key (see checkHostKeyStrength): either would let someone else pose as
// this server to its users.
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

// minRSABits is the smallest RSA host key accepted. RSA-1024 has been
// below every published guidance (NIST SP 800-131A) since 2013; OpenSSH
// itself refuses RSA keys under 1024 bits and makes 3072 by default.
const minRSABits = 2048

// checkHostKeyStrength refuses host keys too weak to prove the server:
// RSA under minRSABits and DSA (1024 bits by definition, removed from
// OpenSSH). Refused rather than warned about: a warning scrolls past in
// a server's log while every client keeps trusting the weak key, and the
// fix (a new ed25519 key) takes one command.
func checkHostKeyStrength(pub gossh.PublicKey) error {
	switch pub.Type() {
	case gossh.InsecureKeyAlgoDSA:
		return errors.New("a DSA key is too weak (1024 bits; OpenSSH no longer accepts DSA); want ed25519, ECDSA or RSA of at least 2048 bits")
	case gossh.KeyAlgoRSA:
		ck, ok := pub.(gossh.CryptoPublicKey)
		if !ok {
			return nil
		}
		rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey)
		if !ok {
			return nil
		}
		if bits := rk.N.BitLen(); bits < minRSABits {
			return fmt.Errorf("an RSA key of %d bits is too weak; want ed25519, ECDSA or RSA of at least %d bits", bits, minRSABits)
		}
	}
	return nil
}

// createHostKey writes a new key with O_EXCL, so two servers starting at
// once cannot each write a different key; the loser reads the winner's.
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
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
