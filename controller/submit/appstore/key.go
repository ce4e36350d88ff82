package appstore

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Key is an App Store Connect API key: the issuer (ascApiKeyIssuerId),
// the key's id (ascApiKeyId) and its private key, the .p8 file App Store
// Connect lets one download once (ascApiKeyPath). It prints as its id
// only, so a %v of an Options or a Key in a log carries no secret.
type Key struct {
	IssuerID, KeyID string
	PrivateKey      []byte // the .p8: PEM "PRIVATE KEY", PKCS #8, EC P-256
}

func (k Key) String() string   { return "App Store Connect API key " + k.KeyID }
func (k Key) GoString() string { return k.String() }

// audience is the aud claim App Store Connect requires of every token.
const audience = "appstoreconnect-v1"

// tokenLifetime is how long a token is good for. App Store Connect refuses
// one whose exp is more than 20 minutes after its own clock's now; five
// minutes of margin absorb a clock running a little ahead.
const tokenLifetime = 15 * time.Minute

// maxKeyFile bounds a .p8: a real one is about 250 bytes.
const maxKeyFile = 16 << 10

// signer returns the key's ECDSA private key after checking the ids'
// forms (as eas.json's schema has them). Its errors never quote the key.
func (k Key) signer() (*ecdsa.PrivateKey, error) {
	if k.IssuerID == "" || k.KeyID == "" {
		return nil, fmt.Errorf("the App Store Connect API key needs its issuer id (ascApiKeyIssuerId) and key id (ascApiKeyId): copy them from %s", keysPage)
	}
	if err := errors.Join(checkIssuerID(k.IssuerID), checkKeyID(k.KeyID)); err != nil {
		return nil, err
	}
	const fix = "ascApiKeyPath must be the .p8 file App Store Connect gave for key " // + id
	if len(k.PrivateKey) == 0 || len(k.PrivateKey) > maxKeyFile {
		return nil, fmt.Errorf("the App Store Connect API key is empty or larger than %d KiB: %s%s", maxKeyFile>>10, fix, k.KeyID)
	}
	block, _ := pem.Decode(k.PrivateKey)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("the App Store Connect API key is not a PEM \"PRIVATE KEY\": %s%s", fix, k.KeyID)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the App Store Connect API key is not a PKCS #8 private key: %s%s", fix, k.KeyID)
	}
	ec, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the App Store Connect API key is not an EC P-256 key (App Store Connect signs with ES256): %s%s", fix, k.KeyID)
	}
	return ec, nil
}

// token is a bearer token for App Store Connect as Apple documents it
// ("Generating Tokens for API Requests"): ES256, kid and typ JWT in the
// header; iss, iat, exp and aud in the claims.
func token(sk *ecdsa.PrivateKey, k Key, now time.Time) (string, time.Time, error) {
	exp := now.Add(tokenLifetime)
	header := map[string]string{"alg": "ES256", "kid": k.KeyID, "typ": "JWT"}
	claims := map[string]any{"iss": k.IssuerID, "iat": now.Unix(), "exp": exp.Unix(), "aud": audience}
	t, err := signJWT(sk, header, claims)
	return t, exp, err
}

// signJWT signs a compact JWS with ES256: the signature is r and s, 32
// bytes each, big-endian (RFC 7518 §3.4), not ASN.1.
func signJWT(sk *ecdsa.PrivateKey, header, claims any) (string, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return "", fmt.Errorf("encode the token header: %w", err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode the token claims: %w", err)
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, sk, digest[:])
	if err != nil {
		return "", errors.New("sign the App Store Connect token: the key could not sign")
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}
