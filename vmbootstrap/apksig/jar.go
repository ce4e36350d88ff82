package apksig

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path"
	"slices"
	"strings"

	_ "crypto/sha1" // JAR signatures name SHA-1
	_ "crypto/sha256"
	_ "crypto/sha512"
)

// maxMetaBytes bounds a META-INF file read into memory.
const maxMetaBytes = 8 << 20

var (
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidMessageDigest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}

	digestOIDs = map[string]crypto.Hash{
		"1.3.14.3.2.26":          crypto.SHA1,
		"2.16.840.1.101.3.4.2.1": crypto.SHA256,
		"2.16.840.1.101.3.4.2.2": crypto.SHA384,
		"2.16.840.1.101.3.4.2.3": crypto.SHA512,
	}
)

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"explicit,optional,tag:0"`
}

type signedData struct {
	Version          int
	DigestAlgorithms asn1.RawValue
	ContentInfo      contentInfo
	Certificates     asn1.RawValue `asn1:"optional,tag:0"`
	CRLs             asn1.RawValue `asn1:"optional,tag:1"`
	SignerInfos      []signerInfo  `asn1:"set"`
}

type signerInfo struct {
	Version                   int
	IssuerAndSerial           issuerAndSerial
	DigestAlgorithm           pkix.AlgorithmIdentifier
	AuthenticatedAttributes   asn1.RawValue `asn1:"optional,tag:0"`
	DigestEncryptionAlgorithm pkix.AlgorithmIdentifier
	EncryptedDigest           []byte
	UnauthenticatedAttributes asn1.RawValue `asn1:"optional,tag:1"`
}

type issuerAndSerial struct {
	Issuer asn1.RawValue
	Serial *big.Int
}

type attribute struct {
	Type   asn1.ObjectIdentifier
	Values asn1.RawValue `asn1:"set"`
}

// jarSigners verifies the JAR signature: each META-INF/<name>.RSA|.EC|.DSA
// is a PKCS#7 SignedData whose signature covers META-INF/<name>.SF.
func jarSigners(r io.ReaderAt, size int64) ([]Signer, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotZip, err)
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		if strings.HasPrefix(strings.ToUpper(f.Name), "META-INF/") && !strings.Contains(f.Name[len("META-INF/"):], "/") {
			files[strings.ToUpper(f.Name)] = f
		}
	}
	var blocks []string
	for name := range files {
		switch path.Ext(name) {
		case ".RSA", ".EC", ".DSA":
			blocks = append(blocks, name)
		}
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%w: no APK Signature Scheme v2/v3 block and no JAR signature (META-INF/*.RSA, *.EC or *.DSA)", ErrNotSigned)
	}
	slices.Sort(blocks)
	var manifest []byte
	if mf, ok := files["META-INF/MANIFEST.MF"]; ok {
		if manifest, err = readEntry(mf); err != nil {
			return nil, err
		}
	}
	var signers []Signer
	for _, name := range blocks {
		sfName := strings.TrimSuffix(name, path.Ext(name)) + ".SF"
		sfFile, ok := files[sfName]
		if !ok {
			return nil, fmt.Errorf("%s has no %s to sign", files[name].Name, sfName)
		}
		sf, err := readEntry(sfFile)
		if err != nil {
			return nil, err
		}
		block, err := readEntry(files[name])
		if err != nil {
			return nil, err
		}
		cert, err := verifyPKCS7(block, sf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", files[name].Name, err)
		}
		if err := checkManifestDigest(sf, manifest); err != nil {
			return nil, fmt.Errorf("%s: %w", sfFile.Name, err)
		}
		signers = append(signers, newSigner(cert))
	}
	return signers, nil
}

func readEntry(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > maxMetaBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than a signature file's %d", f.Name, f.UncompressedSize64, maxMetaBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxMetaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	if len(b) > maxMetaBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", f.Name, maxMetaBytes)
	}
	return b, nil
}

// verifyPKCS7 checks a detached PKCS#7 SignedData over content and returns
// the certificate of its (first) signer.
func verifyPKCS7(der, content []byte) (*x509.Certificate, error) {
	var ci contentInfo
	if rest, err := asn1.Unmarshal(der, &ci); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("not a PKCS#7 structure")
	}
	if !ci.ContentType.Equal(oidSignedData) {
		return nil, fmt.Errorf("PKCS#7 content of type %s, not SignedData", ci.ContentType)
	}
	var sd signedData
	if rest, err := asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("malformed PKCS#7 SignedData: %v", err)
	}
	if len(sd.SignerInfos) == 0 {
		return nil, fmt.Errorf("PKCS#7 SignedData without a signer")
	}
	certs, err := x509.ParseCertificates(sd.Certificates.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKCS#7 certificates do not parse: %w", err)
	}
	si := sd.SignerInfos[0]
	var cert *x509.Certificate
	for _, c := range certs {
		if bytes.Equal(c.RawIssuer, si.IssuerAndSerial.Issuer.FullBytes) && si.IssuerAndSerial.Serial != nil && c.SerialNumber.Cmp(si.IssuerAndSerial.Serial) == 0 {
			cert = c
			break
		}
	}
	if cert == nil {
		return nil, fmt.Errorf("PKCS#7 SignedData does not carry its signer's certificate")
	}
	h, ok := digestOIDs[si.DigestAlgorithm.Algorithm.String()]
	if !ok {
		return nil, fmt.Errorf("unsupported digest algorithm %s", si.DigestAlgorithm.Algorithm)
	}
	signed := content
	if len(si.AuthenticatedAttributes.FullBytes) > 0 {
		// With signed attributes, the signature covers them (as a SET)
		// and they carry the content's digest.
		if err := checkMessageDigest(si.AuthenticatedAttributes.Bytes, h, content); err != nil {
			return nil, err
		}
		signed = bytes.Clone(si.AuthenticatedAttributes.FullBytes)
		signed[0] = 0x31 // [0] IMPLICIT → SET
	}
	hh := h.New()
	hh.Write(signed)
	digest := hh.Sum(nil)
	switch k := cert.PublicKey.(type) {
	case *rsa.PublicKey:
		err = rsa.VerifyPKCS1v15(k, h, digest, si.EncryptedDigest)
	case *ecdsa.PublicKey:
		if !ecdsa.VerifyASN1(k, digest, si.EncryptedDigest) {
			err = errors.New("ECDSA verification failed")
		}
	default:
		return nil, fmt.Errorf("signature by a %T key, which this verifier does not check", cert.PublicKey)
	}
	if err != nil {
		return nil, fmt.Errorf("the signature over the .SF file does not verify with %s's key: %w", cert.Subject, err)
	}
	return cert, nil
}

func checkMessageDigest(attrs []byte, h crypto.Hash, content []byte) error {
	for rest := attrs; len(rest) > 0; {
		var a attribute
		var err error
		if rest, err = asn1.Unmarshal(rest, &a); err != nil {
			return fmt.Errorf("malformed signed attributes: %v", err)
		}
		if !a.Type.Equal(oidMessageDigest) {
			continue
		}
		var md []byte
		if _, err := asn1.Unmarshal(a.Values.Bytes, &md); err != nil {
			return fmt.Errorf("malformed messageDigest attribute: %v", err)
		}
		hh := h.New()
		hh.Write(content)
		if !bytes.Equal(hh.Sum(nil), md) {
			return fmt.Errorf("the .SF file does not match the digest its signature covers")
		}
		return nil
	}
	return fmt.Errorf("signed attributes without a messageDigest")
}

// checkManifestDigest checks the .SF's digest of the whole MANIFEST.MF
// (its main section's "<alg>-Digest-Manifest"), when it has one.
func checkManifestDigest(sf, manifest []byte) error {
	hashes := map[string]crypto.Hash{"SHA-512": crypto.SHA512, "SHA-384": crypto.SHA384, "SHA-256": crypto.SHA256, "SHA1": crypto.SHA1, "SHA-1": crypto.SHA1}
	for _, line := range mainSection(sf) {
		name, value, ok := strings.Cut(line, ": ")
		alg, isDigest := strings.CutSuffix(name, "-Digest-Manifest")
		h, known := hashes[strings.ToUpper(alg)]
		if !ok || !isDigest || !known {
			continue
		}
		if manifest == nil {
			return fmt.Errorf("it digests META-INF/MANIFEST.MF, which is missing")
		}
		want, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return fmt.Errorf("malformed %s: %v", name, err)
		}
		hh := h.New()
		hh.Write(manifest)
		if !bytes.Equal(hh.Sum(nil), want) {
			return fmt.Errorf("its %s does not match META-INF/MANIFEST.MF: the manifest was modified after signing", name)
		}
		return nil
	}
	return nil
}

// mainSection returns the header lines of a manifest-format file's main
// section, continuation lines (starting with a space) joined.
func mainSection(b []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxMetaBytes)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			break
		}
		if strings.HasPrefix(line, " ") && len(lines) > 0 {
			lines[len(lines)-1] += line[1:]
			continue
		}
		lines = append(lines, line)
	}
	return lines
}
