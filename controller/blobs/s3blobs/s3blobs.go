// Package s3blobs keeps a controller's build files in an S3-compatible
// bucket (AWS S3, MinIO, Cloudflare R2, Ceph RGW, versitygw), so replicas on
// different machines serve each other's builds. It implements
// blobs.Backend with github.com/minio/minio-go/v7: a small client that
// signs (SigV4), presigns, retries with backoff and uploads large objects in
// parallel parts, with no AWS SDK dependency tree.
//
// An upload is first written to a spool file on local disk, hashed by the
// caller, and sent to the bucket only once its size and SHA-256 are
// verified: by Prepare to a staging object, before the database
// transaction that records it, whose Commit then copies it into place
// inside the service (or by Commit itself, unprepared). A PUT is atomic in
// S3, so an object appears whole or not at all, and because the spool file
// can be re-read, a PUT that fails on the way is retried. Clients can skip
// the controller (off with direct=false): PresignGet signs a short-lived
// GET URL they follow, PresignPut and StartMultipart the URLs they upload
// to, and CompleteMultipart has the service hash what they sent.
package s3blobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/freeagent-build/freeagent/controller/blobs"
)

// Config is where the objects live, as told by an s3:// URL.
type Config struct {
	Bucket string
	Prefix string // key prefix without slashes at either end; may be empty
	// Endpoint is the service's host[:port]; Secure says https.
	Endpoint string
	Secure   bool
	Region   string // empty: found from the bucket
	// NoDirect turns direct downloads off (direct=false): every download
	// streams through the controller, for clients that cannot reach the
	// service themselves.
	NoDirect bool
}

// ParseURL reads s3://BUCKET[/PREFIX][?endpoint=URL&region=R]. Without an
// endpoint the bucket is on AWS S3.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, err
	}
	if u.Scheme != "s3" || u.Host == "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return Config{}, errors.New("want s3://BUCKET/PREFIX?endpoint=URL&region=R")
	}
	cfg := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: "s3.amazonaws.com", Secure: true}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return Config{}, fmt.Errorf("bucket %q: %w", cfg.Bucket, err)
	}
	if cfg.Prefix != "" {
		if err := blobs.CheckKey(cfg.Prefix); err != nil {
			return Config{}, fmt.Errorf("prefix %q: want plain path elements such as farm/builds", cfg.Prefix)
		}
	}
	q := u.Query()
	for k, v := range q {
		switch {
		case len(v) != 1:
			return Config{}, fmt.Errorf("parameter %q given %d times", k, len(v))
		case k == "endpoint":
			e, err := url.Parse(v[0])
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || strings.Trim(e.Path, "/") != "" || e.RawQuery != "" || e.User != nil {
				return Config{}, fmt.Errorf("endpoint %q: want the service's base URL such as https://s3.example.com or http://127.0.0.1:9000", v[0])
			}
			cfg.Endpoint, cfg.Secure = e.Host, e.Scheme == "https"
		case k == "region":
			cfg.Region = v[0]
		case k == "direct":
			direct, err := strconv.ParseBool(v[0])
			if err != nil {
				return Config{}, fmt.Errorf("direct=%q: want true or false", v[0])
			}
			cfg.NoDirect = !direct
		default:
			return Config{}, fmt.Errorf("unknown parameter %q (known: endpoint, region, direct)", k)
		}
	}
	return cfg, nil
}

// String is the URL the configuration came from, without credentials
// (there are none in it).
func (c Config) String() string {
	u := url.URL{Scheme: "s3", Host: c.Bucket, Path: "/" + c.Prefix}
	q := url.Values{}
	scheme := "http"
	if c.Secure {
		scheme = "https"
	}
	q.Set("endpoint", scheme+"://"+c.Endpoint)
	if c.Region != "" {
		q.Set("region", c.Region)
	}
	if c.NoDirect {
		q.Set("direct", "false")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Options are what Open needs besides the Config.
type Options struct {
	// SpoolDir holds uploads until they are committed (on the data
	// directory's disk); created when missing.
	SpoolDir string
	// Credentials, when nil, come from the standard places in order: the
	// AWS environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN), the shared credentials file (~/.aws/credentials
	// or AWS_SHARED_CREDENTIALS_FILE, profile AWS_PROFILE), then an EC2,
	// ECS or EKS role.
	Credentials *credentials.Credentials
	// Transport, when set, carries the client's requests (tests put a
	// faulty proxy in the way).
	Transport http.RoundTripper
}

// Store is a bucket (under a prefix) holding a controller's objects.
type Store struct {
	c      *minio.Client
	cfg    Config
	spool  string
	prefix string // cfg.Prefix + "/", or ""
}

// spoolMaxAge is how old a spool file must be before Open treats it as
// left by a crash: no upload takes a day.
const spoolMaxAge = 24 * time.Hour

// Open connects to the bucket and checks that it exists and that the
// credentials may write, read and delete in it; the error says which of
// these failed and how to fix it.
func Open(ctx context.Context, cfg Config, opts Options) (*Store, error) {
	if opts.SpoolDir == "" {
		return nil, errors.New("s3blobs: no spool directory")
	}
	if err := os.MkdirAll(opts.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the upload spool directory: %w", err)
	}
	removeStaleSpool(opts.SpoolDir)
	creds := opts.Credentials
	if creds == nil {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{Client: &http.Client{Timeout: 5 * time.Second}},
		})
	}
	v, err := creds.GetWithContext(&credentials.CredContext{Client: &http.Client{Timeout: 5 * time.Second}})
	if err != nil || v.AccessKeyID == "" {
		return nil, fmt.Errorf("no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE with ~/.aws/credentials, or run with an instance role)%s", errSuffix(err))
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{Creds: creds, Secure: cfg.Secure, Region: cfg.Region, Transport: opts.Transport})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", cfg.Endpoint, err)
	}
	s := &Store{c: c, cfg: cfg, spool: opts.SpoolDir}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// check makes sure the bucket is there and the credentials work, by
// writing, reading and deleting a small object.
func (s *Store) check(ctx context.Context) error {
	where := fmt.Sprintf("bucket %q at %s", s.cfg.Bucket, s.cfg.Endpoint)
	ok, err := s.c.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.explain(where, err)
	}
	if !ok {
		return fmt.Errorf("%s does not exist: create it (for example `aws s3 mb s3://%s`, or `mc mb`) or name another bucket", where, s.cfg.Bucket)
	}
	key := s.prefix + "freeagent-check/" + strings.ReplaceAll(time.Now().UTC().Format("20060102T150405.000000000"), ".", "")
	body := strings.NewReader("freeagent store check\n")
	if _, err := s.c.PutObject(ctx, s.cfg.Bucket, key, body, body.Size(), minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("cannot write to %s: %w", where, s.explain(where, err))
	}
	if _, err := s.c.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{}); err != nil {
		return fmt.Errorf("cannot read from %s: %w", where, s.explain(where, err))
	}
	if err := s.c.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("cannot delete in %s: %w", where, s.explain(where, err))
	}
	return nil
}

// explain turns an S3 error into what to fix.
func (s *Store) explain(where string, err error) error {
	switch code := minio.ToErrorResponse(err).Code; code {
	case "":
		return fmt.Errorf("cannot reach %s: %w (check the endpoint and that the service is up)", where, err)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidSecurity":
		return fmt.Errorf("%s refused the credentials (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AWS_PROFILE in use)", where, code)
	case "AccessDenied", "AllAccessDisabled":
		// Some services answer a wrong secret this way too.
		return fmt.Errorf("%s denied access (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AWS_PROFILE in use), and that these credentials may s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the bucket", where, code)
	case "NoSuchBucket":
		return fmt.Errorf("%s does not exist: create it or name another bucket", where)
	default:
		return fmt.Errorf("%s: %w", where, err)
	}
}

func removeStaleSpool(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "upload-") && time.Since(info.ModTime()) > spoolMaxAge {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func (s *Store) object(key string) (string, error) {
	if err := blobs.CheckKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// notExist maps S3's "no such key" to fs.ErrNotExist.
func notExist(key string, err error) error {
	if code := minio.ToErrorResponse(err).Code; code == "NoSuchKey" || code == "NotFound" {
		return fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	return err
}

// Create spools the upload to local disk; Commit sends it.
func (s *Store) Create(_ context.Context, key string) (blobs.Writer, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(s.spool, "upload-*")
	if err != nil {
		return nil, fmt.Errorf("create upload spool file: %w", err)
	}
	return &writer{s: s, f: f, name: name}, nil
}

type writer struct {
	s      *Store
	f      *os.File
	name   string
	n      int64
	done   bool
	staged string // the staging object Prepare sent the bytes to
}

func (w *writer) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.n += int64(n)
	return n, err
}

// Prepare PUTs the spooled bytes to a staging object under uploads/ (the
// collector removes one a crash leaves), so that Commit is a copy inside
// the service.
func (w *writer) Prepare(ctx context.Context) error {
	if w.done || w.staged != "" {
		return errors.New("object already prepared, committed or aborted")
	}
	r := make([]byte, 12)
	rand.Read(r) //nolint:errcheck // crypto/rand does not fail on supported platforms
	staged := w.s.prefix + "uploads/staged/" + hex.EncodeToString(r)
	if err := w.put(ctx, staged); err != nil {
		return err
	}
	w.staged = staged
	w.discard()
	return nil
}

// put sends the spooled bytes to name (in parallel parts when large). Each
// request is retried with backoff by the client, re-reading the spool file;
// the object appears only when the PUT (or the multipart upload's
// completion) succeeds, and a failed multipart upload is aborted.
func (w *writer) put(ctx context.Context, name string) error {
	// A SectionReader, not the file: the client closes a body that is an
	// io.Closer, and re-reads one that is an io.Seeker when it retries.
	body := io.NewSectionReader(w.f, 0, w.n)
	if _, err := w.s.c.PutObject(ctx, w.s.cfg.Bucket, name, body, w.n,
		minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("upload %s to bucket %s: %w", name, w.s.cfg.Bucket, err)
	}
	return nil
}

// Commit PUTs the spooled bytes to the object, or, once prepared, copies
// the staging object there inside the service (ComposeObject: a single
// copy, or part copies beyond 5 GiB) and removes it.
func (w *writer) Commit(ctx context.Context) error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	w.done = true
	if w.staged == "" {
		defer w.discard()
		return w.put(ctx, w.name)
	}
	defer w.removeStaged()
	if _, err := w.s.c.ComposeObject(ctx, minio.CopyDestOptions{Bucket: w.s.cfg.Bucket, Object: w.name},
		minio.CopySrcOptions{Bucket: w.s.cfg.Bucket, Object: w.staged}); err != nil {
		return fmt.Errorf("copy %s to %s in bucket %s: %w", w.staged, w.name, w.s.cfg.Bucket, err)
	}
	return nil
}

// removeStaged deletes the staging object, whatever became of the
// request that used it: the collector removes it if this fails.
func (w *writer) removeStaged() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.s.c.RemoveObject(ctx, w.s.cfg.Bucket, w.staged, minio.RemoveObjectOptions{}) //nolint:errcheck // see above
}

func (w *writer) discard() {
	w.f.Close()
	os.Remove(w.f.Name())
}

func (w *writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.staged != "" {
		w.removeStaged()
		return
	}
	w.discard()
}

// Open returns the object; reads at any offset are ranged GETs.
func (s *Store) Open(ctx context.Context, key string) (blobs.Object, blobs.Info, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, blobs.Info{}, err
	}
	obj, err := s.c.GetObject(ctx, s.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, blobs.Info{}, notExist(key, err)
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, blobs.Info{}, notExist(key, err)
	}
	return obj, blobs.Info{Key: key, Size: st.Size, ModTime: st.LastModified}, nil
}

func (s *Store) Stat(ctx context.Context, key string) (blobs.Info, error) {
	name, err := s.object(key)
	if err != nil {
		return blobs.Info{}, err
	}
	st, err := s.c.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return blobs.Info{}, notExist(key, err)
	}
	return blobs.Info{Key: key, Size: st.Size, ModTime: st.LastModified}, nil
}

// Delete removes the object; S3 does not mind a missing one.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.cfg.Bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s from bucket %s: %w", name, s.cfg.Bucket, err)
	}
	return nil
}

// DirectTransfers is false with direct=false.
func (s *Store) DirectTransfers() bool { return !s.cfg.NoDirect }

// PresignGet signs a GET of the object for ttl. Signing is local: with the
// region known (region=R, or learnt from the bucket on the first call) it
// costs no request to the service.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration, contentType, disposition string) (string, error) {
	if s.cfg.NoDirect {
		return "", nil
	}
	name, err := s.object(key)
	if err != nil {
		return "", err
	}
	q := url.Values{}
	if contentType != "" {
		q.Set("response-content-type", contentType)
	}
	if disposition != "" {
		q.Set("response-content-disposition", disposition)
	}
	u, err := s.c.PresignedGetObject(ctx, s.cfg.Bucket, name, ttl, q)
	if err != nil {
		return "", fmt.Errorf("sign a download of %s: %w", name, err)
	}
	return u.String(), nil
}

// PresignPut signs a PUT carrying x-amz-checksum-sha256: the service
// refuses a PUT without that header or with other bytes (BadDigest).
func (s *Store) PresignPut(ctx context.Context, key string, ttl time.Duration, sha256hex string) (string, map[string]string, error) {
	if s.cfg.NoDirect {
		return "", nil, nil
	}
	name, err := s.object(key)
	if err != nil {
		return "", nil, err
	}
	raw, err := hex.DecodeString(sha256hex)
	if err != nil || len(raw) != sha256.Size {
		return "", nil, fmt.Errorf("invalid SHA-256 %q", sha256hex)
	}
	sum := base64.StdEncoding.EncodeToString(raw)
	u, err := s.c.PresignHeader(ctx, http.MethodPut, s.cfg.Bucket, name, ttl, nil, http.Header{"X-Amz-Checksum-Sha256": {sum}})
	if err != nil {
		return "", nil, fmt.Errorf("sign an upload of %s: %w", name, err)
	}
	return u.String(), map[string]string{"X-Amz-Checksum-Sha256": sum}, nil
}

// Checksum reads the object's size and the SHA-256 the service verified
// when it was uploaded with one.
func (s *Store) Checksum(ctx context.Context, key string) (blobs.Info, string, error) {
	name, err := s.object(key)
	if err != nil {
		return blobs.Info{}, "", err
	}
	st, err := s.c.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		return blobs.Info{}, "", notExist(key, err)
	}
	info := blobs.Info{Key: key, Size: st.Size, ModTime: st.LastModified}
	raw, err := base64.StdEncoding.DecodeString(st.ChecksumSHA256)
	if err != nil || len(raw) != sha256.Size {
		return info, "", nil // none kept (or a multipart checksum of checksums)
	}
	return info, hex.EncodeToString(raw), nil
}

// Copy copies src to dst inside the service (up to 5 GiB: what direct
// uploads are limited to).
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	from, err := s.object(src)
	if err != nil {
		return err
	}
	to, err := s.object(dst)
	if err != nil {
		return err
	}
	if _, err := s.c.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.cfg.Bucket, Object: to},
		minio.CopySrcOptions{Bucket: s.cfg.Bucket, Object: from}); err != nil {
		return fmt.Errorf("copy %s to %s in bucket %s: %w", from, to, s.cfg.Bucket, notExist(src, err))
	}
	return nil
}

// List yields the objects under prefix, paging through the bucket listing.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blobs.Info, error] {
	return func(yield func(blobs.Info, error) bool) {
		for o := range s.c.ListObjectsIter(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
			if o.Err != nil {
				yield(blobs.Info{}, fmt.Errorf("list bucket %s: %w", s.cfg.Bucket, o.Err))
				return
			}
			if !yield(blobs.Info{Key: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size, ModTime: o.LastModified}, nil) {
				return
			}
		}
	}
}

// SweepStale aborts multipart uploads under the store's prefix begun more
// than age ago (an upload whose process died, or a direct upload the
// client gave up: the service would keep their parts, and bill them,
// forever) and removes spool files as old.
func (s *Store) SweepStale(ctx context.Context, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	n := 0
	entries, _ := os.ReadDir(s.spool)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "upload-") && info.ModTime().Before(cutoff) {
			if os.Remove(filepath.Join(s.spool, e.Name())) == nil {
				n++
			}
		}
	}
	m, err := s.AbortStaleMultipart(ctx, "", age)
	return n + m, err
}

// AbortStaleMultipart aborts the multipart uploads under prefix begun more
// than age ago and says how many.
func (s *Store) AbortStaleMultipart(ctx context.Context, prefix string, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	n := 0
	core := minio.Core{Client: s.c}
	for up := range s.c.ListIncompleteUploads(ctx, s.cfg.Bucket, s.prefix+prefix, true) {
		if up.Err != nil {
			return n, s.explain(fmt.Sprintf("list incomplete uploads in bucket %q", s.cfg.Bucket), up.Err)
		}
		if up.Initiated.After(cutoff) {
			continue
		}
		if err := core.AbortMultipartUpload(ctx, s.cfg.Bucket, up.Key, up.UploadID); err != nil && minio.ToErrorResponse(err).Code != "NoSuchUpload" {
			return n, s.explain(fmt.Sprintf("abort the incomplete upload of %s", up.Key), err)
		}
		n++
	}
	return n, nil
}

// StartMultipart begins a multipart upload for key with the SHA-256
// checksum algorithm and signs an UploadPart PUT for each of its parts,
// numbered from 1, with the part's Content-Length and
// x-amz-checksum-sha256 (its declared SHA-256, base64 as S3 wants it)
// among the signed headers: a part URL takes exactly its part's declared
// bytes (other bytes are a 400 BadDigest, a part without the header is
// refused), so an abandoned upload holds nothing but what was declared.
// The parts are assembled at key + partsSuffix; their checksums only vouch
// for the parts, so CompleteMultipart has the service hash the assembled
// object as it copies it to key.
func (s *Store) StartMultipart(ctx context.Context, key string, size, partSize int64, partSums []string, ttl time.Duration) (string, []string, []map[string]string, error) {
	if s.cfg.NoDirect {
		return "", nil, nil, nil
	}
	name, err := s.object(key)
	if err != nil {
		return "", nil, nil, err
	}
	if size < 1 || partSize < 1 {
		return "", nil, nil, fmt.Errorf("a multipart upload of %d bytes in parts of %d", size, partSize)
	}
	parts := (size + partSize - 1) / partSize
	if parts > maxParts {
		return "", nil, nil, fmt.Errorf("a multipart upload has 1 to %d parts, not %d", maxParts, parts)
	}
	if int64(len(partSums)) != parts {
		return "", nil, nil, fmt.Errorf("a multipart upload of %d parts with %d part checksums", parts, len(partSums))
	}
	headers := make([]map[string]string, parts)
	for i, h := range partSums {
		raw, err := hex.DecodeString(h)
		if err != nil || len(raw) != sha256.Size {
			return "", nil, nil, fmt.Errorf("part %d's SHA-256 %q is not 64 hex digits", i+1, h)
		}
		headers[i] = map[string]string{"X-Amz-Checksum-Sha256": base64.StdEncoding.EncodeToString(raw)}
	}
	name += partsSuffix
	core := minio.Core{Client: s.c}
	id, err := core.NewMultipartUpload(ctx, s.cfg.Bucket, name, minio.PutObjectOptions{ContentType: "application/octet-stream",
		UserMetadata: map[string]string{"X-Amz-Checksum-Algorithm": minio.ChecksumSHA256.String()}})
	if err != nil {
		return "", nil, nil, s.explain(fmt.Sprintf("start a multipart upload of %s", name), err)
	}
	urls := make([]string, parts)
	for i := range urls {
		q := url.Values{"partNumber": {strconv.Itoa(i + 1)}, "uploadId": {id}}
		length := min(partSize, size-int64(i)*partSize)
		signed := http.Header{"Content-Length": {strconv.FormatInt(length, 10)}}
		for k, v := range headers[i] {
			signed.Set(k, v)
		}
		u, err := s.c.PresignHeader(ctx, http.MethodPut, s.cfg.Bucket, name, ttl, q, signed)
		if err != nil {
			core.AbortMultipartUpload(context.WithoutCancel(ctx), s.cfg.Bucket, name, id) //nolint:errcheck // best effort: the collector aborts what remains
			return "", nil, nil, fmt.Errorf("sign part %d of %s: %w", i+1, name, err)
		}
		urls[i] = u.String()
	}
	return id, urls, headers, nil
}

// maxParts is S3's limit on the parts of one upload.
const maxParts = 10000

// partsSuffix names where a multipart upload is assembled, beside its key.
const partsSuffix = ".parts"

// CompleteMultipart assembles the upload from exactly the parts 1..parts,
// each partSize bytes but the last, naming each part's SHA-256 as the
// service listed it (it verified them as the parts came; an upload begun
// without checksums, by a previous release, lists none), then copies the
// assembled object to key asking the service for its SHA-256: a multipart
// object only has a checksum of its parts' checksums, a copied one the
// whole object's, so Checksum reports it. (A copy onto itself would do
// with less room, but some services, versitygw 1.8 among them, then hash
// nothing.) A repeat after the upload was completed only does what is
// missing. Parts of other sizes, or missing, abort the upload and give
// blobs.ErrChecksum; an unknown upload with nothing assembled gives
// fs.ErrNotExist.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, size, partSize int64) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	parts := name + partsSuffix
	core := minio.Core{Client: s.c}
	var got []minio.CompletePart
	var total int64
	marker := 0
	for {
		res, err := core.ListObjectParts(ctx, s.cfg.Bucket, parts, uploadID, marker, 1000)
		if code := minio.ToErrorResponse(err).Code; code == "NoSuchUpload" || code == "NoSuchKey" {
			return s.checksumCopy(ctx, key, parts, name)
		}
		if err != nil {
			return fmt.Errorf("list the parts of the upload of %s: %w", name, err)
		}
		for _, p := range res.ObjectParts {
			got = append(got, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag, ChecksumSHA256: p.ChecksumSHA256})
			want := min(partSize, size-int64(p.PartNumber-1)*partSize)
			if p.PartNumber != len(got) || p.Size != want {
				core.AbortMultipartUpload(ctx, s.cfg.Bucket, parts, uploadID) //nolint:errcheck // best effort: the collector aborts what remains
				return fmt.Errorf("%w: part %d of the upload holds %d bytes where %d were declared", blobs.ErrChecksum, p.PartNumber, p.Size, want)
			}
			total += p.Size
		}
		if !res.IsTruncated {
			break
		}
		marker = res.NextPartNumberMarker
	}
	if total != size {
		core.AbortMultipartUpload(ctx, s.cfg.Bucket, parts, uploadID) //nolint:errcheck // best effort: the collector aborts what remains
		return fmt.Errorf("%w: the upload's %d parts hold %d bytes where %d were declared", blobs.ErrChecksum, len(got), total, size)
	}
	if _, err := core.CompleteMultipartUpload(ctx, s.cfg.Bucket, parts, uploadID, got, minio.PutObjectOptions{}); err != nil {
		if code := minio.ToErrorResponse(err).Code; code != "NoSuchUpload" {
			return fmt.Errorf("complete the upload of %s: %w", name, err)
		}
	}
	return s.checksumCopy(ctx, key, parts, name)
}

// checksumCopy copies the assembled parts to name asking for a SHA-256,
// which the service computes as it copies, and removes the parts object.
// Once name holds the copy there is nothing to do.
func (s *Store) checksumCopy(ctx context.Context, key, parts, name string) error {
	if _, sum, err := s.Checksum(ctx, key); err == nil && sum != "" {
		return nil
	}
	if _, err := s.c.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.cfg.Bucket, Object: name, ChecksumType: minio.ChecksumSHA256, ReplaceMetadata: true, ContentType: "application/octet-stream"},
		minio.CopySrcOptions{Bucket: s.cfg.Bucket, Object: parts}); err != nil {
		return fmt.Errorf("have the store hash %s: %w", name, notExist(key, err))
	}
	s.c.RemoveObject(ctx, s.cfg.Bucket, parts, minio.RemoveObjectOptions{}) //nolint:errcheck // best effort: the collector removes staging leftovers
	return nil
}

// AbortMultipart abandons an upload and frees its parts; an unknown upload
// is not an error.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	err = minio.Core{Client: s.c}.AbortMultipartUpload(ctx, s.cfg.Bucket, name+partsSuffix, uploadID)
	if code := minio.ToErrorResponse(err).Code; err != nil && code != "NoSuchUpload" {
		return fmt.Errorf("abort the upload of %s: %w", name, err)
	}
	if err := s.c.RemoveObject(ctx, s.cfg.Bucket, name+partsSuffix, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s from bucket %s: %w", name+partsSuffix, s.cfg.Bucket, err)
	}
	return nil
}

// CreateNew PUTs with If-None-Match: *, which the service refuses (412)
// when the key exists.
func (s *Store) CreateNew(ctx context.Context, key string, data []byte) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	opts.SetMatchETagExcept("*")
	_, err = s.c.PutObject(ctx, s.cfg.Bucket, name, bytes.NewReader(data), int64(len(data)), opts)
	if code := minio.ToErrorResponse(err).Code; code == "PreconditionFailed" || code == "ConditionalRequestConflict" {
		return fmt.Errorf("%s: %w", key, fs.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("upload %s to bucket %s: %w", name, s.cfg.Bucket, err)
	}
	return nil
}
