// Package apksig tells which certificates signed an Android artifact: an
// .apk (APK Signature Scheme v3 or v2 block before the ZIP central
// directory, else the v1 JAR signature) or an .aab (JAR signature only).
// The VM uses it to refuse an artifact signed with a key other than the
// team's, before anyone uploads it to a store.
//
// What is verified, in Go, for the scheme reported:
//   - v3/v2: every signer's signature over its signed-data block, with the
//     signer's public key, which must be its first certificate's; and the
//     APK's content digest (1 MiB chunks of the entries, central directory
//     and end record, as the scheme defines it) against the signed digest
//     of that algorithm.
//   - v1: every signature block's PKCS#7 signature over its .SF file (with
//     or without signed attributes), by the certificate the SignerInfo
//     names; and the .SF's whole-manifest digest, when it has one, against
//     META-INF/MANIFEST.MF.
//
// Not verified: certificate chains and validity dates (Android trusts any
// self-signed certificate), the per-entry digests of MANIFEST.MF and .SF
// (v1 entries can be tampered with unnoticed), the verity (Merkle tree)
// content digests, v3's proof-of-rotation lineage and SDK ranges, the v3.1
// block (key rotation, ignored: the v3 block names the original signer),
// stripping protection, and DSA signatures (refused as unsupported).
package apksig

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// Scheme is the signature scheme whose signers are reported.
type Scheme string

const (
	SchemeV3 Scheme = "APK Signature Scheme v3"
	SchemeV2 Scheme = "APK Signature Scheme v2"
	SchemeV1 Scheme = "v1 JAR signature"
)

// Signer is one signer's certificate.
type Signer struct {
	Certificate []byte // DER
	// SHA256 is the lowercase hex SHA-256 of Certificate, as apksigner
	// and keytool print it (without colons).
	SHA256  string
	Subject string
}

// Signers are the signers of an artifact under the scheme that decides
// its signature: v3, else v2, else v1.
type Signers struct {
	Scheme  Scheme
	Signers []Signer
}

var (
	// ErrNotSigned: a ZIP with no signature of any scheme.
	ErrNotSigned = errors.New("not signed")
	// ErrNotZip: the file is not a ZIP archive, so neither an APK nor an AAB.
	ErrNotZip = errors.New("not a zip archive")
)

// SignerCertificates reads the signature of the .apk or .aab at path.
// An unsigned artifact's error wraps ErrNotSigned; a file that is not a
// ZIP wraps ErrNotZip; a signature that does not verify is an error too.
func SignerCertificates(path string) (Signers, error) {
	f, err := os.Open(path)
	if err != nil {
		return Signers{}, fmt.Errorf("reading the signature of %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Signers{}, fmt.Errorf("reading the signature of %s: %w", path, err)
	}
	s, err := Read(f, st.Size())
	if err != nil {
		return Signers{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Read is SignerCertificates on size bytes of r.
func Read(r io.ReaderAt, size int64) (Signers, error) {
	z, err := locateZip(r, size)
	if err != nil {
		return Signers{}, err
	}
	block, err := z.signingBlock()
	if err != nil {
		return Signers{}, err
	}
	for _, s := range []struct {
		id     uint32
		scheme Scheme
	}{{blockIDv3, SchemeV3}, {blockIDv2, SchemeV2}} {
		value, ok := block[s.id]
		if !ok {
			continue
		}
		signers, err := z.verifySchemeBlock(value, s.id == blockIDv3)
		if err != nil {
			return Signers{}, fmt.Errorf("%s: %w", s.scheme, err)
		}
		return Signers{Scheme: s.scheme, Signers: signers}, nil
	}
	signers, err := jarSigners(r, size)
	if err != nil {
		return Signers{}, err
	}
	return Signers{Scheme: SchemeV1, Signers: signers}, nil
}

func newSigner(cert *x509.Certificate) Signer {
	sum := sha256.Sum256(cert.Raw)
	return Signer{Certificate: cert.Raw, SHA256: hex.EncodeToString(sum[:]), Subject: cert.Subject.String()}
}

// readAt reads exactly n bytes at off, n bounded by the caller.
func readAt(r io.ReaderAt, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && int64(len(b)) == n) {
		return nil, fmt.Errorf("reading %d bytes at offset %d: %w", n, off, err)
	}
	return b, nil
}

// lpReader reads the little-endian, length-prefixed structures of the
// APK signing block from a slice, every length checked against what is
// left.
type lpReader struct {
	b   []byte
	err error
}

func (r *lpReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *lpReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail("truncated: %d bytes left where a 4-byte field was expected", len(r.b))
		return 0
	}
	v := uint32(r.b[0]) | uint32(r.b[1])<<8 | uint32(r.b[2])<<16 | uint32(r.b[3])<<24
	r.b = r.b[4:]
	return v
}

// prefixed returns the next uint32-length-prefixed field.
func (r *lpReader) prefixed() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail("a field of %d bytes with only %d left", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// sequence splits a length-prefixed sequence of length-prefixed items.
func (r *lpReader) sequence() [][]byte {
	seq := &lpReader{b: r.prefixed()}
	var items [][]byte
	for r.err == nil && seq.err == nil && len(seq.b) > 0 {
		items = append(items, seq.prefixed())
	}
	if seq.err != nil {
		r.fail("%v", seq.err)
	}
	return items
}
