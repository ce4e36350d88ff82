// Package install makes a completed build installable from a phone: signed,
// expiring links that need no headers (a phone's browser cannot send an API
// key), the install page, the iOS over-the-air manifest and the QR code of
// the page's link.
package install

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Objects a link can open: the install page, the iOS manifest, or one
// artifact (ArtifactObject).
const (
	Page     = "page"
	Manifest = "manifest"
)

// ArtifactObject names an artifact as a signed object. The prefix keeps an
// artifact called "page" from sharing the page's signature.
func ArtifactObject(name string) string { return "artifact/" + name }

// ErrInvalidLink is a link whose signature does not match: altered, or
// signed with another key.
var ErrInvalidLink = errors.New("this install link is not valid (altered or from another controller); ask for a new one")

// ErrExpiredLink is a link past its expiry.
var ErrExpiredLink = errors.New("this install link has expired; ask for a new one (expo-build status shows it)")

// DefaultTTL is how long a link works unless configured otherwise.
const DefaultTTL = 7 * 24 * time.Hour

// Signer signs and checks links with HMAC-SHA256 over (build id, object,
// expiry).
type Signer struct {
	key []byte
	ttl time.Duration
}

// NewSigner returns a signer whose links last ttl (DefaultTTL when 0).
func NewSigner(key []byte, ttl time.Duration) (*Signer, error) {
	if len(key) < 16 {
		return nil, errors.New("link signing key must be at least 16 bytes")
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Signer{key: key, ttl: ttl}, nil
}

// Expiry is when a link made now stops working: a lifetime from now, rounded
// down to a tenth of it (at most an hour), so asking again soon gives the
// same link and the same QR code.
func (s *Signer) Expiry(now time.Time) time.Time {
	return now.Add(s.ttl).Truncate(max(time.Second, min(time.Hour, s.ttl/10)))
}

func (s *Signer) sign(buildID, object string, exp int64) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "freeagent-install-v1\n%s\n%s\n%d", buildID, object, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// Query returns the exp and sig parameters that open object of buildID until exp.
func (s *Signer) Query(buildID, object string, exp time.Time) url.Values {
	return url.Values{"exp": {strconv.FormatInt(exp.Unix(), 10)}, "sig": {s.sign(buildID, object, exp.Unix())}}
}

// Verify checks a request's exp and sig parameters for object of buildID
// and returns the link's expiry. The signature is checked before the
// expiry, so an altered expiry is reported as invalid, not expired.
func (s *Signer) Verify(buildID, object string, q url.Values, now time.Time) (time.Time, error) {
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return time.Time{}, ErrInvalidLink
	}
	got, err := hex.DecodeString(q.Get("sig"))
	want, _ := hex.DecodeString(s.sign(buildID, object, exp))
	if err != nil || !hmac.Equal(got, want) {
		return time.Time{}, ErrInvalidLink
	}
	at := time.Unix(exp, 0)
	if !now.Before(at) {
		return at, ErrExpiredLink
	}
	return at, nil
}

// Links builds the signed URLs of one build, all expiring together.
type Links struct {
	Base    string // public base URL, no trailing slash
	BuildID string
	Expires time.Time
	signer  *Signer
}

// Links returns the URL builder for buildID under base, expiring at exp.
func (s *Signer) Links(base, buildID string, exp time.Time) Links {
	return Links{Base: strings.TrimRight(base, "/"), BuildID: buildID, Expires: exp, signer: s}
}

func (l Links) url(path, object string) string {
	return l.Base + path + "?" + l.signer.Query(l.BuildID, object, l.Expires).Encode()
}

// PagePath, ManifestPath and ArtifactPath are the routes the links open.
func PagePath(buildID string) string     { return "/install/" + buildID }
func ManifestPath(buildID string) string { return "/install/" + buildID + "/manifest.plist" }
func ArtifactPath(buildID, name string) string {
	return "/install/" + buildID + "/files/" + url.PathEscape(name)
}

// Page is the install page's URL, the one the QR code carries.
func (l Links) Page() string { return l.url(PagePath(l.BuildID), Page) }

// Manifest is the iOS over-the-air manifest's URL.
func (l Links) Manifest() string { return l.url(ManifestPath(l.BuildID), Manifest) }

// Artifact is an artifact's download URL.
func (l Links) Artifact(name string) string {
	return l.url(ArtifactPath(l.BuildID, name), ArtifactObject(name))
}

// ITMS is the itms-services link that makes iOS install an ad-hoc or
// enterprise IPA from its manifest.
func (l Links) ITMS() string {
	return "itms-services://?action=download-manifest&url=" + url.QueryEscape(l.Manifest())
}
