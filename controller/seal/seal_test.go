package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

func newBox(t *testing.T) (Box, []byte) {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return b, key
}

func TestSealBindsKeyAndData(t *testing.T) {
	b, _ := newBox(t)
	sealed := b.Seal([]byte("keystore password"), []byte("p/production/NAME"))
	if bytes.Contains(sealed, []byte("keystore password")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if got, err := b.Open(sealed, []byte("p/production/NAME")); err != nil || string(got) != "keystore password" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := b.Open(sealed, []byte("p/preview/NAME")); err == nil {
		t.Fatal("opened with other additional data")
	}
	other, _ := newBox(t)
	if _, err := other.Open(sealed, []byte("p/production/NAME")); err == nil {
		t.Fatal("opened under another key")
	}
	d1, err := b.Derive("one")
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := b.Derive("two")
	if _, err := d2.Open(d1.Seal([]byte("x"), nil), nil); err == nil {
		t.Fatal("a value sealed for one purpose opened for another")
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	for _, bad := range [][]byte{nil, sealed[:5], tampered} {
		if _, err := b.Open(bad, []byte("p/production/NAME")); err == nil {
			t.Fatalf("opened a damaged value %x", bad)
		}
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
}

// TestOpensWhatTheControllerSealedBefore: certificates (AES-GCM under the
// raw key, the build id as additional data) and webhook secrets (under
// HMAC-SHA256(key, purpose)) sealed before this package existed still open.
func TestOpensWhatTheControllerSealedBefore(t *testing.T) {
	b, key := newBox(t)
	oldSeal := func(k, plain, aad []byte) []byte {
		block, _ := aes.NewCipher(k)
		aead, _ := cipher.NewGCM(block)
		nonce := make([]byte, aead.NonceSize())
		rand.Read(nonce)
		return aead.Seal(nonce, nonce, plain, aad)
	}
	if got, err := b.Open(oldSeal(key, []byte("p12"), []byte("build1")), []byte("build1")); err != nil || string(got) != "p12" {
		t.Fatalf("old certificates: %q %v", got, err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("freeagent webhook secrets v1"))
	d, err := b.Derive("freeagent webhook secrets v1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.Open(oldSeal(m.Sum(nil), []byte("whsec_x"), []byte("ep1")), []byte("ep1")); err != nil || string(got) != "whsec_x" {
		t.Fatalf("old webhook secret: %q %v", got, err)
	}
}

// TestMACIsKeyed: a box's MAC is HMAC-SHA256 under its key: the same for
// the same data, another for other data or under another key, and refused
// by a box without a key.
func TestMACIsKeyed(t *testing.T) {
	b, key := newBox(t)
	got, err := b.MAC([]byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("value"))
	if !bytes.Equal(got, m.Sum(nil)) {
		t.Fatal("MAC is not HMAC-SHA256 under the box's key")
	}
	again, _ := b.MAC([]byte("value"))
	other, _ := b.MAC([]byte("other value"))
	d, _ := b.Derive("hashing")
	derived, _ := d.MAC([]byte("value"))
	if !bytes.Equal(again, got) || bytes.Equal(other, got) || bytes.Equal(derived, got) {
		t.Fatal("MAC does not tell data and keys apart")
	}
	if _, err := (Box{}).MAC([]byte("value")); err == nil {
		t.Fatal("a box without a key hashed")
	}
}
