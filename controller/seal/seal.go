// Package seal encrypts the small secrets the controller must read back
// (signing certificates, Android keystores, webhook secrets, project
// variables) with AES-256-GCM. Each value is bound to where it belongs by
// the additional data: a sealed value copied to another row or another
// build's directory does not open there.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Box seals and opens values under one key. The sealed form is the random
// nonce followed by the ciphertext and its tag.
type Box struct {
	key  []byte
	aead cipher.AEAD
}

// New returns a box for a 32-byte AES-256 key.
func New(key []byte) (Box, error) {
	if len(key) != 32 {
		return Box{}, fmt.Errorf("a sealing key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return Box{}, fmt.Errorf("sealing key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Box{}, fmt.Errorf("sealing key: %w", err)
	}
	return Box{key: key, aead: aead}, nil
}

// Derive returns a box under HMAC-SHA256(key, purpose): one master key
// (the certificate key, which replicas already share) gives each kind of
// secret its own key, so a value sealed for one purpose never opens as
// another's.
func (b Box) Derive(purpose string) (Box, error) {
	if b.aead == nil {
		return Box{}, errors.New("derive a sealing key: the box has no key")
	}
	m := hmac.New(sha256.New, b.key)
	m.Write([]byte(purpose))
	return New(m.Sum(nil))
}

// MAC returns HMAC-SHA256 of data under the box's key: a keyed hash that
// tells equal values apart without revealing them. Use a box derived for
// hashing alone, not one that also seals.
func (b Box) MAC(data []byte) ([]byte, error) {
	if b.aead == nil {
		return nil, errors.New("hash a value: the box has no key")
	}
	m := hmac.New(sha256.New, b.key)
	m.Write(data)
	return m.Sum(nil), nil
}

// Seal encrypts plain, authenticating aad with it.
func (b Box) Seal(plain, aad []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	rand.Read(nonce) //nolint:errcheck // crypto/rand.Read never fails
	return b.aead.Seal(nonce, nonce, plain, aad)
}

// Open decrypts a sealed value; it fails when the key or aad differ or the
// value was altered.
func (b Box) Open(sealed, aad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, errors.New("the sealed value is truncated")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("wrong key, or the sealed value was altered or moved: %w", err)
	}
	return plain, nil
}
