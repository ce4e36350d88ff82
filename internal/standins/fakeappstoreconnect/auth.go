package fakeappstoreconnect

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"
)

// maxTokenLifetime is App Store Connect's limit on a token's exp: at most
// 20 minutes after now.
const maxTokenLifetime = 20 * time.Minute

// maxToken bounds the Authorization header the stand-in reads.
const maxToken = 8 << 10

// authorize checks a request's bearer token as App Store Connect does
// ("Generating Tokens for API Requests"): an ES256 JWT whose header names
// a known key (kid) and typ JWT, signed by that key, whose claims are the
// key's issuer, the audience appstoreconnect-v1, and an exp in the future
// but no more than 20 minutes ahead; a scope, when given, must list the
// request. It returns why it refused ("" when it did not).
func (s *Server) authorize(r *http.Request) string {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || raw == "" {
		return "no bearer token"
	}
	if len(raw) > maxToken {
		return "token too long"
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "not a compact JWS"
	}
	var header struct {
		Alg, Kid, Typ string
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return "header: " + err.Error()
	}
	if header.Alg != "ES256" {
		return "alg " + header.Alg + " is not ES256"
	}
	if header.Typ != "JWT" {
		return "typ is not JWT"
	}
	key, ok := s.keys[header.Kid]
	if !ok {
		return "unknown kid " + header.Kid
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "signature is not 64 bytes of r||s"
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(key.Public, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "signature does not verify with key " + header.Kid
	}
	var claims struct {
		Iss   string   `json:"iss"`
		Aud   string   `json:"aud"`
		Iat   *int64   `json:"iat"`
		Exp   *int64   `json:"exp"`
		Scope []string `json:"scope"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return "claims: " + err.Error()
	}
	now := s.now()
	switch {
	case claims.Iss != key.IssuerID:
		return "iss is not the key's issuer"
	case claims.Aud != "appstoreconnect-v1":
		return "aud " + claims.Aud + " is not appstoreconnect-v1"
	case claims.Exp == nil || claims.Iat == nil:
		return "no exp or iat"
	case !now.Before(time.Unix(*claims.Exp, 0)):
		return "expired"
	case time.Unix(*claims.Exp, 0).Sub(now) > maxTokenLifetime:
		return "exp more than 20 minutes ahead"
	case claims.Scope != nil && !slices.Contains(claims.Scope, r.Method+" "+r.URL.Path):
		return "request not in the token's scope"
	}
	return ""
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("not base64url: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}
