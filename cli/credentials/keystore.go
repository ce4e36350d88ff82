package credentials

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/freeagent-build/freeagent/api"
)

// MaxKeystoreBytes bounds a keystore read into memory. Upload keystores
// are a few kilobytes; anything near this is not one.
const MaxKeystoreBytes = 1 << 20

// Keystore types, as keytool's -storetype names them and as
// api.KeystoreInfo.Type carries them.
const (
	TypeJKS    = "JKS"
	TypePKCS12 = "PKCS12"
)

// Problem is what is wrong with a keystore, so callers can name the field
// the developer must fix.
type Problem int

const (
	// NotAKeystore: the bytes are neither JKS nor PKCS12.
	NotAKeystore Problem = iota + 1
	// Damaged: a keystore, but truncated or malformed.
	Damaged
	// Unsupported: a keystore format or algorithm this tool cannot read.
	Unsupported
	// WrongStorePassword: the store password does not open it.
	WrongStorePassword
	// NoSuchAlias: no key entry has the alias.
	NoSuchAlias
	// WrongKeyPassword: the key password does not decrypt the alias's key.
	WrongKeyPassword
)

// KeystoreError says why a keystore cannot sign: what is wrong and, for a
// missing alias, which aliases the keystore does hold.
type KeystoreError struct {
	Problem Problem
	Type    string   // TypeJKS or TypePKCS12 once recognised
	Alias   string   // the alias asked for
	Aliases []string // the key entries present (NoSuchAlias)
	Detail  string   // what the parser saw, for Damaged/Unsupported/NotAKeystore
}

func (e *KeystoreError) Error() string {
	return e.describe("the keystore", "the keystore password", "the key alias", "the key password")
}

// describe words the error naming the keystore and its three secrets as
// the caller knows them (fields of credentials.json, or flags).
func (e *KeystoreError) describe(file, storePassword, alias, keyPassword string) string {
	switch e.Problem {
	case NotAKeystore:
		return fmt.Sprintf("%s is not a keystore (neither JKS nor PKCS12: %s); point it at the .jks/.keystore/.p12 file keytool or EAS created", file, e.Detail)
	case Damaged:
		return fmt.Sprintf("%s is a %s keystore that is truncated or damaged (%s); copy it again from where it was made (`eas credentials` can download it)", file, e.Type, e.Detail)
	case Unsupported:
		return fmt.Sprintf("%s cannot be read (%s); convert it with `keytool -importkeystore -srckeystore <file> -destkeystore upload.jks -deststoretype JKS`", file, e.Detail)
	case WrongStorePassword:
		return fmt.Sprintf("%s does not open %s (keytool reports the same as 'keystore password was incorrect'); check the password", storePassword, file)
	case NoSuchAlias:
		held := "no key entries at all"
		if len(e.Aliases) > 0 {
			held = "only " + strings.Join(quoteAll(e.Aliases), ", ")
		}
		return fmt.Sprintf("%s %q is not a key entry of %s, which holds %s; set it to one of those (`keytool -list -keystore <file>` lists them)", alias, e.Alias, file, held)
	case WrongKeyPassword:
		return fmt.Sprintf("%s does not decrypt the key %q in %s (keytool reports the same as 'Cannot recover key'); check the key password (without one, the keystore password is used)", keyPassword, e.Alias, file)
	}
	return fmt.Sprintf("%s: unusable keystore", file)
}

func quoteAll(ss []string) []string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return q
}

// ValidateKeystore opens a keystore the way Gradle's signing does (store
// password, then alias, then key password) and identifies the key's
// certificate. An empty keyPassword means the store password, as EAS
// treats a credentials.json without one. Errors are *KeystoreError.
func ValidateKeystore(raw []byte, storePassword, alias, keyPassword string) (api.KeystoreInfo, error) {
	if keyPassword == "" {
		keyPassword = storePassword
	}
	if len(raw) > MaxKeystoreBytes {
		return api.KeystoreInfo{}, &KeystoreError{Problem: NotAKeystore, Alias: alias, Detail: fmt.Sprintf("%d bytes, more than any keystore's %d", len(raw), MaxKeystoreBytes)}
	}
	var (
		cert *x509.Certificate
		typ  string
		err  error
	)
	switch {
	case len(raw) >= 4 && binary.BigEndian.Uint32(raw) == jksMagic:
		typ = TypeJKS
		cert, err = openJKS(raw, storePassword, alias, keyPassword)
	case len(raw) >= 4 && binary.BigEndian.Uint32(raw) == jceksMagic:
		return api.KeystoreInfo{}, &KeystoreError{Problem: Unsupported, Type: "JCEKS", Alias: alias, Detail: "a JCEKS keystore"}
	case len(raw) > 0 && raw[0] == 0x30: // DER SEQUENCE: PKCS#12's PFX
		typ = TypePKCS12
		cert, err = openPKCS12(raw, storePassword, alias, keyPassword)
	default:
		return api.KeystoreInfo{}, &KeystoreError{Problem: NotAKeystore, Alias: alias, Detail: describeStart(raw)}
	}
	if err != nil {
		var ke *KeystoreError
		if errors.As(err, &ke) {
			ke.Type, ke.Alias = typ, alias
		}
		return api.KeystoreInfo{}, err
	}
	sum := sha256.Sum256(cert.Raw)
	return api.KeystoreInfo{
		Type:              typ,
		KeyAlias:          alias,
		CertificateSHA256: hex.EncodeToString(sum[:]),
		Subject:           cert.Subject.String(),
	}, nil
}

// describeStart says what a non-keystore looks like, without echoing it.
func describeStart(raw []byte) string {
	switch {
	case len(raw) == 0:
		return "the file is empty"
	case bytes.HasPrefix(raw, []byte("-----BEGIN")):
		return "it is PEM text; keytool keystores are binary"
	case bytes.HasPrefix(raw, []byte("PK\x03\x04")):
		return "it is a zip archive"
	}
	return fmt.Sprintf("it starts with bytes % x", raw[:min(len(raw), 4)])
}

// The JKS format (sun.security.provider.JavaKeyStore): a big-endian
// header, the entries, and a SHA-1 over the password, a fixed whitener
// and everything before it. Parsed here rather than with keystore-go,
// which allocates whatever a length field says before reading it and
// panics on a short key blob.
const (
	jksMagic   = 0xFEEDFEED
	jceksMagic = 0xCECECECE
)

var (
	// jksKeyProtector is Sun's proprietary key-protection algorithm.
	jksKeyProtector = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 42, 2, 17, 1, 1}
	jksWhitener     = []byte("Mighty Aphrodite")
)

type jksEntry struct {
	alias     string
	key       []byte   // the protected key, nil for a trusted certificate
	certChain [][]byte // DER, leaf first
}

// jksReader reads the format's fields from a byte slice, every length
// checked against what is left.
type jksReader struct {
	b   []byte
	off int
	err error
}

func (r *jksReader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("a field of %d bytes at offset %d runs past the end of the file (%d bytes)", n, r.off, len(r.b))
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *jksReader) u16() uint16 {
	if s := r.take(2); s != nil {
		return binary.BigEndian.Uint16(s)
	}
	return 0
}

func (r *jksReader) u32() uint32 {
	if s := r.take(4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

// utf reads Java's writeUTF: a 2-byte length and modified UTF-8, which
// equals UTF-8 for the aliases keytool writes.
func (r *jksReader) utf() string { return string(r.take(uint64(r.u16()))) }

func (r *jksReader) cert(version uint32) []byte {
	if version == 2 {
		if t := r.utf(); r.err == nil && t != "X.509" {
			r.err = fmt.Errorf("certificate of type %q, not X.509", t)
			return nil
		}
	}
	return r.take(uint64(r.u32()))
}

// javaPassword is a password as Java's char[] reaches the JKS digests:
// UTF-16 code units, big-endian.
func javaPassword(p string) []byte {
	u := utf16.Encode([]rune(p))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.BigEndian.PutUint16(b[2*i:], c)
	}
	return b
}

func parseJKS(raw []byte, storePassword string) ([]jksEntry, error) {
	r := &jksReader{b: raw}
	r.u32() // magic, checked by the caller
	version := r.u32()
	if r.err == nil && version != 1 && version != 2 {
		return nil, &KeystoreError{Problem: Unsupported, Detail: fmt.Sprintf("JKS version %d", version)}
	}
	count := r.u32()
	var entries []jksEntry
	for i := uint32(0); i < count && r.err == nil; i++ {
		tag := r.u32()
		e := jksEntry{alias: r.utf()}
		r.take(8) // creation date
		switch tag {
		case 1:
			e.key = r.take(uint64(r.u32()))
			n := r.u32()
			for j := uint32(0); j < n && r.err == nil; j++ {
				e.certChain = append(e.certChain, r.cert(version))
			}
		case 2:
			e.certChain = [][]byte{r.cert(version)}
		default:
			if r.err == nil {
				r.err = fmt.Errorf("entry %d has unknown tag %d", i, tag)
			}
		}
		entries = append(entries, e)
	}
	body := r.off
	digest := r.take(sha1.Size)
	if r.err != nil {
		return nil, &KeystoreError{Problem: Damaged, Detail: r.err.Error()}
	}
	h := sha1.New()
	h.Write(javaPassword(storePassword))
	h.Write(jksWhitener)
	h.Write(raw[:body])
	if !bytes.Equal(h.Sum(nil), digest) {
		return nil, &KeystoreError{Problem: WrongStorePassword}
	}
	if r.off != len(raw) {
		return nil, &KeystoreError{Problem: Damaged, Detail: fmt.Sprintf("%d bytes after the integrity digest", len(raw)-r.off)}
	}
	return entries, nil
}

func openJKS(raw []byte, storePassword, alias, keyPassword string) (*x509.Certificate, error) {
	entries, err := parseJKS(raw, storePassword)
	if err != nil {
		return nil, err
	}
	var aliases []string
	for _, e := range entries {
		if e.key == nil {
			continue
		}
		aliases = append(aliases, e.alias)
		// Java looks aliases up lowercased (keytool stores them so).
		if !strings.EqualFold(e.alias, alias) {
			continue
		}
		if len(e.certChain) == 0 {
			return nil, &KeystoreError{Problem: Damaged, Detail: fmt.Sprintf("key entry %q has no certificate", e.alias)}
		}
		key, err := recoverJKSKey(e.key, keyPassword)
		if err != nil {
			return nil, err
		}
		return certForKey(e.certChain[0], key, e.alias)
	}
	slices.Sort(aliases)
	return nil, &KeystoreError{Problem: NoSuchAlias, Aliases: aliases}
}

// recoverJKSKey undoes Sun's KeyProtector: the protected blob is a salt,
// the key XORed with a SHA-1 keystream seeded by password and salt, and a
// SHA-1 of password and key that tells a wrong password.
func recoverJKSKey(protected []byte, password string) (crypto.PrivateKey, error) {
	var info struct {
		Algo struct {
			Algorithm  asn1.ObjectIdentifier
			Parameters asn1.RawValue `asn1:"optional"`
		}
		Data []byte
	}
	if rest, err := asn1.Unmarshal(protected, &info); err != nil || len(rest) > 0 {
		return nil, &KeystoreError{Problem: Damaged, Detail: "a protected key that is not DER"}
	}
	if !info.Algo.Algorithm.Equal(jksKeyProtector) {
		return nil, &KeystoreError{Problem: Unsupported, Detail: "a key protected with algorithm " + info.Algo.Algorithm.String()}
	}
	d := info.Data
	if len(d) < 2*sha1.Size+1 {
		return nil, &KeystoreError{Problem: Damaged, Detail: "a protected key too short to hold one"}
	}
	pw := javaPassword(password)
	salt, enc, check := d[:sha1.Size], d[sha1.Size:len(d)-sha1.Size], d[len(d)-sha1.Size:]
	plain := make([]byte, len(enc))
	for off, block := 0, salt; off < len(enc); off += sha1.Size {
		h := sha1.New()
		h.Write(pw)
		h.Write(block)
		block = h.Sum(nil)
		for i := 0; i < sha1.Size && off+i < len(enc); i++ {
			plain[off+i] = enc[off+i] ^ block[i]
		}
	}
	h := sha1.New()
	h.Write(pw)
	h.Write(plain)
	if !bytes.Equal(h.Sum(nil), check) {
		return nil, &KeystoreError{Problem: WrongKeyPassword}
	}
	key, err := x509.ParsePKCS8PrivateKey(plain)
	if err != nil {
		return nil, &KeystoreError{Problem: Unsupported, Detail: "a private key Go cannot parse: " + err.Error()}
	}
	return key, nil
}

// certForKey parses the entry's leaf certificate and checks that it is
// the key's: a keystore whose certificate was replaced would sign with a
// key no store recognises.
func certForKey(der []byte, key crypto.PrivateKey, alias string) (*x509.Certificate, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, &KeystoreError{Problem: Damaged, Detail: fmt.Sprintf("the certificate of %q does not parse: %v", alias, err)}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, &KeystoreError{Problem: Unsupported, Detail: fmt.Sprintf("a %T key", key)}
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, &KeystoreError{Problem: Damaged, Detail: fmt.Sprintf("the certificate of %q is not for its private key", alias)}
	}
	return cert, nil
}

// openPKCS12 reads a PKCS#12 keystore with go-pkcs12. Its ToPEM is the
// one entry point that keeps the bags' attributes, and a Java alias is
// the key bag's friendlyName; its certificate is the certificate bag with
// the same localKeyId. keytool protects the keys of a PKCS12 keystore with
// the store password (it ignores -keypass), so a different key password
// cannot decrypt them, as Java's getKey would find.
func openPKCS12(raw []byte, storePassword, alias, keyPassword string) (*x509.Certificate, error) {
	blocks, err := pkcs12.ToPEM(raw, storePassword)
	if errors.Is(err, pkcs12.ErrIncorrectPassword) {
		return nil, &KeystoreError{Problem: WrongStorePassword}
	}
	if errors.Is(err, pkcs12.ErrDecryption) {
		// The integrity MAC passed, so the entries are intact but
		// protected with a password other than the store password.
		return nil, &KeystoreError{Problem: Unsupported, Detail: "a PKCS12 keystore whose entries are protected with a password other than the store password"}
	}
	if err != nil && strings.Contains(err.Error(), "unknown attribute") {
		// Java marks trusted-certificate entries with an attribute
		// go-pkcs12 does not know; upload keystores have none.
		return nil, &KeystoreError{Problem: Unsupported, Detail: "a PKCS12 keystore with trusted-certificate entries besides its keys (" + err.Error() + ")"}
	}
	var notImpl pkcs12.NotImplementedError
	if errors.As(err, &notImpl) {
		return nil, &KeystoreError{Problem: Unsupported, Detail: err.Error()}
	}
	if err != nil {
		return nil, &KeystoreError{Problem: Damaged, Detail: err.Error()}
	}
	var aliases []string
	var keyBlock *pem.Block
	for _, b := range blocks {
		if b.Type != "PRIVATE KEY" {
			continue
		}
		name := b.Headers["friendlyName"]
		aliases = append(aliases, name)
		if strings.EqualFold(name, alias) {
			keyBlock = b
		}
	}
	if keyBlock == nil {
		slices.Sort(aliases)
		return nil, &KeystoreError{Problem: NoSuchAlias, Aliases: aliases}
	}
	if keyPassword != storePassword {
		return nil, &KeystoreError{Problem: WrongKeyPassword}
	}
	var certDER []byte
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		if id := keyBlock.Headers["localKeyId"]; id != "" && b.Headers["localKeyId"] == id {
			certDER = b.Bytes
			break
		}
		if certDER == nil && strings.EqualFold(b.Headers["friendlyName"], alias) {
			certDER = b.Bytes
		}
	}
	if certDER == nil {
		return nil, &KeystoreError{Problem: Damaged, Detail: fmt.Sprintf("key entry %q has no certificate", alias)}
	}
	// ToPEM marshals keys as PKCS#1 or SEC 1 despite the block type.
	var key crypto.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(keyBlock.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParseECPrivateKey(keyBlock.Bytes); err == nil {
		key = k
	} else {
		return nil, &KeystoreError{Problem: Unsupported, Detail: "a private key that is neither RSA nor EC"}
	}
	return certForKey(certDER, key, alias)
}
