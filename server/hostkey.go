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
