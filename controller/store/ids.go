package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// Token prefixes make a leaked secret recognisable in a log or a paste, and
// let a reader tell the credential types apart at a glance.
const (
	prefixAPIKey      = "fak_"
	prefixWorkerToken = "fwt_"
	prefixBuildToken  = "fbt_"
	prefixLeaseToken  = "flt_"
	prefixOTP         = "fot_"
	prefixVMToken     = "fvt_"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns a 26-character, URL-safe, roughly time-ordered identifier:
// 48 bits of milliseconds then 80 random bits.
func NewID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the OS RNG never fails on supported platforms
	}
	return idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s has the shape NewID produces. File paths are only
// ever built from IDs that pass this check.
func ValidID(s string) bool {
	if len(s) != 26 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') || c == 'i' || c == 'l' || c == 'o' || c == 'u' {
			return false
		}
	}
	return true
}

// newSecret returns a prefixed token with 256 random bits and its hash; only
// the hash is ever stored.
func newSecret(prefix string) (token string, hash []byte) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	token = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashSecret(token)
}

// HashSecret is the one-way form under which every credential is stored and
// looked up. The input has 256 bits of entropy, so an unsalted SHA-256 is
// enough, and looking a hash up by index leaks nothing useful by timing.
func HashSecret(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
