package apksig

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
)

// sigAlgorithm is an APK Signature Scheme v2/v3 signature algorithm.
type sigAlgorithm struct {
	id   uint32
	name string
	hash crypto.Hash
	kind string // "pss", "pkcs1", "ecdsa", "dsa"
	// verity: the content digest is a Merkle tree root, not verified here.
	verity bool
}

// sigAlgorithms in order of preference (strongest first, verity last).
var sigAlgorithms = []sigAlgorithm{
	{0x0102, "RSASSA-PSS with SHA2-512", crypto.SHA512, "pss", false},
	{0x0104, "RSASSA-PKCS1-v1_5 with SHA2-512", crypto.SHA512, "pkcs1", false},
	{0x0202, "ECDSA with SHA2-512", crypto.SHA512, "ecdsa", false},
	{0x0101, "RSASSA-PSS with SHA2-256", crypto.SHA256, "pss", false},
	{0x0103, "RSASSA-PKCS1-v1_5 with SHA2-256", crypto.SHA256, "pkcs1", false},
	{0x0201, "ECDSA with SHA2-256", crypto.SHA256, "ecdsa", false},
	{0x0301, "DSA with SHA2-256", crypto.SHA256, "dsa", false},
	{0x0421, "RSASSA-PKCS1-v1_5 with SHA2-256 (verity)", crypto.SHA256, "pkcs1", true},
	{0x0423, "ECDSA with SHA2-256 (verity)", crypto.SHA256, "ecdsa", true},
	{0x0425, "DSA with SHA2-256 (verity)", crypto.SHA256, "dsa", true},
}

// verifySchemeBlock verifies every signer of a v2 or v3 block and returns
// their certificates.
//
// A signer is: signed data (digests, certificates, [v3: min and max SDK],
// additional attributes), [v3: min and max SDK], signatures (algorithm ID
// and signature over the signed data), and the public key.
func (z *zipLayout) verifySchemeBlock(value []byte, v3 bool) ([]Signer, error) {
	top := &lpReader{b: value}
	rawSigners := top.sequence()
	if top.err != nil {
		return nil, fmt.Errorf("malformed block: %w", top.err)
	}
	if len(rawSigners) == 0 {
		return nil, fmt.Errorf("the block has no signers")
	}
	digests := map[crypto.Hash][]byte{}
	var signers []Signer
	for i, raw := range rawSigners {
		cert, err := z.verifySigner(raw, v3, digests)
		if err != nil {
			return nil, fmt.Errorf("signer #%d: %w", i+1, err)
		}
		signers = append(signers, newSigner(cert))
	}
	return signers, nil
}

func (z *zipLayout) verifySigner(raw []byte, v3 bool, digests map[crypto.Hash][]byte) (*x509.Certificate, error) {
	r := &lpReader{b: raw}
	signedData := r.prefixed()
	if v3 {
		r.u32() // min SDK
		r.u32() // max SDK
	}
	signatures := r.sequence()
	publicKey := r.prefixed()
	if r.err != nil {
		return nil, fmt.Errorf("malformed signer: %w", r.err)
	}

	sd := &lpReader{b: signedData}
	digestItems := sd.sequence()
	certItems := sd.sequence()
	if sd.err != nil {
		return nil, fmt.Errorf("malformed signed data: %w", sd.err)
	}
	if len(certItems) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	cert, err := x509.ParseCertificate(certItems[0])
	if err != nil {
		return nil, fmt.Errorf("its certificate does not parse: %w", err)
	}
	if !bytes.Equal(cert.RawSubjectPublicKeyInfo, publicKey) {
		return nil, fmt.Errorf("its public key is not its certificate's (%s)", cert.Subject)
	}
	pub, err := x509.ParsePKIXPublicKey(publicKey)
	if err != nil {
		return nil, fmt.Errorf("its public key does not parse: %w", err)
	}

	// The strongest signature this package can check.
	sigs := map[uint32][]byte{}
	for _, s := range signatures {
		sr := &lpReader{b: s}
		id := sr.u32()
		sig := sr.prefixed()
		if sr.err != nil {
			return nil, fmt.Errorf("malformed signature: %w", sr.err)
		}
		sigs[id] = sig
	}
	var alg sigAlgorithm
	var sig []byte
	for _, a := range sigAlgorithms {
		if s, ok := sigs[a.id]; ok && a.kind != "dsa" {
			alg, sig = a, s
			break
		}
	}
	if sig == nil {
		return nil, fmt.Errorf("no signature with an algorithm this verifier supports (RSA or ECDSA; found %d signatures)", len(sigs))
	}
	if err := verifySignature(alg, pub, signedData, sig); err != nil {
		return nil, fmt.Errorf("the %s signature over the signed data does not verify with %s's key: %w", alg.name, cert.Subject, err)
	}

	// The signed digest of that algorithm must be the APK's.
	var signedDigest []byte
	for _, d := range digestItems {
		dr := &lpReader{b: d}
		id := dr.u32()
		v := dr.prefixed()
		if dr.err != nil {
			return nil, fmt.Errorf("malformed digest: %w", dr.err)
		}
		if id == alg.id {
			signedDigest = v
		}
	}
	if signedDigest == nil {
		return nil, fmt.Errorf("the signed data has no digest for its %s signature", alg.name)
	}
	if !alg.verity {
		actual, ok := digests[alg.hash]
		if !ok {
			if actual, err = z.contentDigest(alg.hash); err != nil {
				return nil, err
			}
			digests[alg.hash] = actual
		}
		if !bytes.Equal(actual, signedDigest) {
			return nil, fmt.Errorf("the APK's contents do not match the signed digest: the file was modified after signing")
		}
	}
	return cert, nil
}

func verifySignature(alg sigAlgorithm, pub crypto.PublicKey, data, sig []byte) error {
	h := alg.hash.New()
	h.Write(data)
	digest := h.Sum(nil)
	switch k := pub.(type) {
	case *rsa.PublicKey:
		switch alg.kind {
		case "pss":
			return rsa.VerifyPSS(k, alg.hash, digest, sig, &rsa.PSSOptions{SaltLength: alg.hash.Size(), Hash: alg.hash})
		case "pkcs1":
			return rsa.VerifyPKCS1v15(k, alg.hash, digest, sig)
		}
	case *ecdsa.PublicKey:
		if alg.kind == "ecdsa" {
			if !ecdsa.VerifyASN1(k, digest, sig) {
				return fmt.Errorf("ECDSA verification failed")
			}
			return nil
		}
	}
	return fmt.Errorf("a %T key with a %s signature", pub, alg.name)
}

const chunkSize = 1 << 20

// contentDigest is the scheme's digest of the APK: the entries before the
// signing block, the central directory, and the end record with its
// central-directory offset pointing at the signing block instead, each
// cut in 1 MiB chunks; each chunk hashed as 0xa5, its length and its
// bytes; the result hashed as 0x5a, the chunk count and the chunk hashes.
func (z *zipLayout) contentDigest(hashFunc crypto.Hash) ([]byte, error) {
	eocd := bytes.Clone(z.eocd)
	binary.LittleEndian.PutUint32(eocd[16:], uint32(z.blockOffset))
	sections := []io.Reader{
		io.NewSectionReader(z.r, 0, z.blockOffset),
		io.NewSectionReader(z.r, z.cdOffset, z.cdSize),
		bytes.NewReader(eocd),
	}
	lengths := []int64{z.blockOffset, z.cdSize, int64(len(eocd))}
	var count uint32
	for _, n := range lengths {
		count += uint32((n + chunkSize - 1) / chunkSize)
	}
	top := newHash(hashFunc)
	var hdr [5]byte
	hdr[0] = 0x5a
	binary.LittleEndian.PutUint32(hdr[1:], count)
	top.Write(hdr[:])
	buf := make([]byte, chunkSize)
	for i, sec := range sections {
		for left := lengths[i]; left > 0; {
			n := min(left, chunkSize)
			if _, err := io.ReadFull(sec, buf[:n]); err != nil {
				return nil, fmt.Errorf("reading the APK for its digest: %w", err)
			}
			c := newHash(hashFunc)
			hdr[0] = 0xa5
			binary.LittleEndian.PutUint32(hdr[1:], uint32(n))
			c.Write(hdr[:])
			c.Write(buf[:n])
			top.Write(c.Sum(nil))
			left -= n
		}
	}
	return top.Sum(nil), nil
}

func newHash(h crypto.Hash) hash.Hash {
	if h == crypto.SHA512 {
		return sha512.New()
	}
	return sha256.New()
}
