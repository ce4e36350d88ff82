// Package fakeplay stands in for Google Play for tests: a real HTTP server
// on 127.0.0.1 implementing the documented REST flows the farm's
// submissions use, with Google's status codes and error bodies:
//
//   - OAuth 2.0's JWT-bearer token exchange (POST /token): the service
//     account's RS256 signature, the audience (this server's token URL, as
//     Google requires its own) and the lifetime (at most an hour, not
//     expired) are verified;
//   - the Android Publisher API v3 edits: edits.insert, edits.get,
//     edits.delete, edits.bundles.list, edits.bundles.upload (multipart and
//     resumable, as Google's Go client sends them), edits.tracks.list/get/
//     update, edits.commit with changesNotSentForReview.
//
// A bundle's package and versionCode are read from its manifest, as Play
// reads them; a version code already used by the app is refused as Play
// refuses it. What each commit put in which track is recorded (Commits),
// and faults can be injected per operation (Fail, Hang). The product never
// imports this package.
package fakeplay

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scope is the OAuth scope of the Android Publisher API.
const Scope = "https://www.googleapis.com/auth/androidpublisher"

// maxUpload bounds one bundle the stand-in accepts.
const maxUpload = 256 << 20

// Server is a running stand-in Google Play.
type Server struct {
	// URL is the API's root ("http://127.0.0.1:port/"): the client's endpoint.
	URL string
	// TokenURL is where service accounts exchange signed JWTs for tokens.
	TokenURL string

	srv     *httptest.Server
	closing chan struct{} // closed as the server stops: hung answers end
	mu      sync.Mutex
	now     func() time.Time

	accounts map[string]*rsa.PublicKey // client_email → key
	tokens   map[string]token
	apps     map[string]*app
	edits    map[string]*edit
	uploads  map[string]*upload
	commits  []Commit
	faults   map[string][]Fault
	requests map[string]int // operation → count
}

type token struct {
	account string
	expires time.Time
}

type app struct {
	accounts map[string]bool
	tracks   map[string][]Release
	used     map[int64]bool // version codes of every bundle ever committed
}

type edit struct {
	id, pkg, account string
	bundles          []int64
	tracks           map[string][]Release
	updated          map[string]bool // the tracks this edit changed
	gone             bool            // committed or deleted
	uploads          int
}

type upload struct {
	editID string
	data   bytes.Buffer
}

// Release is one release of a track, as Play's Track resource has it.
type Release struct {
	VersionCodes []int64
	Status       string
	UserFraction float64
	ReleaseNotes map[string]string // language → text
}

// Commit is what one edits.commit changed.
type Commit struct {
	Package, EditID, Account string
	ChangesNotSentForReview  bool
	// Tracks are the tracks the edit updated, with their releases.
	Tracks map[string][]Release
}

// Fault is an answer injected into an operation ("token",
// "edits.insert", "edits.get", "bundles.list", "bundles.upload",
// "tracks.list", "tracks.update", "edits.commit").
type Fault struct {
	Status int  // the HTTP status answered (with Google's error body)
	Hang   bool // instead: never answer, until the client gives up
}

// New starts a stand-in Play; it stops when the test ends.
func New(t interface{ Cleanup(func()) }) *Server {
	s := &Server{now: time.Now, accounts: map[string]*rsa.PublicKey{}, tokens: map[string]token{}, apps: map[string]*app{},
		edits: map[string]*edit{}, uploads: map[string]*upload{}, faults: map[string][]Fault{}, requests: map[string]int{},
		closing: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL, s.TokenURL = s.srv.URL+"/", s.srv.URL+"/token"
	t.Cleanup(func() {
		close(s.closing)
		s.srv.Close()
	})
	return s
}

// SetClock makes the stand-in read the time from now (to expire tokens).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// ServiceAccount makes a service account the stand-in knows and returns
// its JSON key file, as the Google Cloud console downloads it.
func (s *Server) ServiceAccount(name string) []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic("generate an RSA key: " + err.Error())
	}
	email := name + "@farm-tests.iam.gserviceaccount.com"
	s.mu.Lock()
	s.accounts[email] = &key.PublicKey
	s.mu.Unlock()
	return KeyFile(email, key, s.TokenURL)
}

// KeyFile is a service account's JSON key file for key.
func KeyFile(email string, key *rsa.PrivateKey, tokenURI string) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("encode an RSA key: " + err.Error())
	}
	id := sha256.Sum256(der)
	b, _ := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": "farm-tests", "private_key_id": hex.EncodeToString(id[:20]),
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1234567890", "token_uri": tokenURI,
		"auth_uri": "https://accounts.google.com/o/oauth2/auth",
	}, "", "  ")
	return b
}

// AddApp makes an app with package pkg that the given service accounts
// (by JSON key file) may publish.
func (s *Server) AddApp(pkg string, keyFiles ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &app{accounts: map[string]bool{}, tracks: map[string][]Release{}, used: map[int64]bool{}}
	for _, t := range []string{"internal", "alpha", "beta", "production"} {
		a.tracks[t] = nil
	}
	for _, k := range keyFiles {
		var f struct {
			ClientEmail string `json:"client_email"`
		}
		_ = json.Unmarshal(k, &f)
		a.accounts[f.ClientEmail] = true
	}
	s.apps[pkg] = a
}

// AddTrack adds a custom (closed testing) track to an app.
func (s *Server) AddTrack(pkg, track string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[pkg].tracks[track] = nil
}

// Used marks a version code as already used by the app (an earlier
// release made elsewhere), in track.
func (s *Server) Used(pkg, track string, versionCode int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[pkg]
	a.used[versionCode] = true
	a.tracks[track] = []Release{{VersionCodes: []int64{versionCode}, Status: "completed"}}
}

// Fail injects faults into an operation's next calls, in order.
func (s *Server) Fail(op string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], faults...)
}

// Commits returns what every commit changed, in order.
func (s *Server) Commits() []Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

// Track returns a track's releases as the app has them now.
func (s *Server) Track(pkg, track string) []Release {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.apps[pkg].tracks[track])
}

// Uploads counts the bundle uploads made into edit id.
func (s *Server) Uploads(editID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.edits[editID]; e != nil {
		return e.uploads
	}
	return 0
}

// Requests counts the calls of an operation.
func (s *Server) Requests(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[op]
}

// apiError is Google's JSON error body.
type apiError struct {
	status         int
	message, state string
}

func (e *apiError) write(w http.ResponseWriter) {
	reason := map[int]string{400: "badRequest", 401: "authError", 403: "forbidden", 404: "notFound", 409: "conflict", 500: "backendError", 503: "backendError"}[e.status]
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{ //nolint:errcheck // the client hung up
		"code": e.status, "message": e.message, "status": e.state,
		"errors": []map[string]string{{"message": e.message, "domain": "global", "reason": reason}},
	}})
}

func errf(status int, state, format string, args ...any) *apiError {
	return &apiError{status: status, state: state, message: fmt.Sprintf(format, args...)}
}

var defaultStates = map[int]string{500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 429: "RESOURCE_EXHAUSTED", 400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}

// fault takes the next injected fault of op: true when it answered.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, op string) bool {
	s.mu.Lock()
	s.requests[op]++
	var f *Fault
	if q := s.faults[op]; len(q) > 0 {
		f, s.faults[op] = &q[0], q[1:]
	}
	s.mu.Unlock()
	switch {
	case f == nil:
		return false
	case f.Hang:
		// The body read to its end, the server notices the client
		// hanging up; closing the stand-in ends the wait too.
		io.Copy(io.Discard, r.Body) //nolint:errcheck // only waiting
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return true
	case op == "token":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		io.WriteString(w, `{"error":"internal_failure","error_description":"Backend Error"}`) //nolint:errcheck
		return true
	}
	errf(f.Status, defaultStates[f.Status], "Backend Error").write(w)
	return true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" && r.Method == http.MethodPost {
		s.token(w, r)
		return
	}
	p := r.URL.Path
	upload := strings.HasPrefix(p, "/upload/")
	p = strings.TrimPrefix(strings.TrimPrefix(p, "/upload"), "/androidpublisher/v3/applications/")
	if p == r.URL.Path {
		errf(404, "NOT_FOUND", "The requested URL %s was not found on this server.", r.URL.Path).write(w)
		return
	}
	account, aerr := s.authenticate(r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	parts := strings.Split(p, "/")
	pkg := parts[0]
	if e := s.checkApp(pkg, account); e != nil {
		e.write(w)
		return
	}
	switch {
	case len(parts) == 2 && parts[1] == "edits" && r.Method == http.MethodPost:
		s.insertEdit(w, r, pkg, account)
	case len(parts) == 3 && strings.HasSuffix(parts[2], ":commit") && r.Method == http.MethodPost:
		s.commit(w, r, pkg, strings.TrimSuffix(parts[2], ":commit"))
	case len(parts) == 3 && r.Method == http.MethodGet:
		s.getEdit(w, r, pkg, parts[2])
	case len(parts) == 3 && r.Method == http.MethodDelete:
		s.deleteEdit(w, r, pkg, parts[2])
	case len(parts) == 4 && parts[3] == "bundles" && upload:
		s.uploadBundle(w, r, pkg, parts[2])
	case len(parts) == 4 && parts[3] == "bundles" && r.Method == http.MethodGet:
		s.listBundles(w, r, pkg, parts[2])
	case len(parts) == 4 && parts[3] == "tracks" && r.Method == http.MethodGet:
		s.listTracks(w, r, pkg, parts[2])
	case len(parts) == 5 && parts[3] == "tracks" && (r.Method == http.MethodPut || r.Method == http.MethodPatch):
		s.updateTrack(w, r, pkg, parts[2], parts[4])
	default:
		errf(404, "NOT_FOUND", "The requested URL %s was not found on this server.", r.URL.Path).write(w)
	}
}

// token is OAuth 2.0's JWT-bearer grant (RFC 7523) as Google runs it.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, r, "token") {
		return
	}
	fail := func(code, desc string) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc}) //nolint:errcheck
	}
	if err := r.ParseForm(); err != nil {
		fail("invalid_request", "Invalid request body")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		fail("unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		fail("invalid_grant", "Invalid JWT: the assertion is not a signed JWT.")
		return
	}
	var header struct{ Alg string }
	var claims struct {
		Iss, Scope, Aud string
		Exp, Iat        int64
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &header) != nil || json.Unmarshal(cb, &claims) != nil {
		fail("invalid_grant", "Invalid JWT: the assertion cannot be decoded.")
		return
	}
	s.mu.Lock()
	pub, now := s.accounts[claims.Iss], s.now()
	s.mu.Unlock()
	if pub == nil {
		fail("invalid_grant", "Invalid grant: account not found")
		return
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if header.Alg != "RS256" || rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		fail("invalid_grant", "Invalid JWT Signature.")
		return
	}
	if claims.Aud != s.TokenURL {
		fail("invalid_grant", "Invalid JWT: Failed audience check. The expected value was "+s.TokenURL+" but the actual value was "+claims.Aud)
		return
	}
	if claims.Exp-claims.Iat > 3600 || now.Unix() >= claims.Exp || claims.Iat > now.Unix()+300 {
		fail("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
		return
	}
	if !slices.Contains(strings.Fields(claims.Scope), Scope) {
		fail("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
		return
	}
	tok := make([]byte, 24)
	rand.Read(tok) //nolint:errcheck // crypto/rand.Read never fails
	access := "ya29.fake-" + hex.EncodeToString(tok)
	s.mu.Lock()
	s.tokens[access] = token{account: claims.Iss, expires: now.Add(time.Hour)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "expires_in": 3599, "token_type": "Bearer"}) //nolint:errcheck
}

func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	t, known := s.tokens[bearer]
	now := s.now()
	s.mu.Unlock()
	if !ok || !known || !now.Before(t.expires) {
		return "", errf(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
	}
	return t.account, nil
}

func (s *Server) checkApp(pkg, account string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[pkg]
	if a == nil {
		return errf(404, "NOT_FOUND", "Package not found: %s.", pkg)
	}
	if !a.accounts[account] {
		return errf(403, "PERMISSION_DENIED", "The caller does not have permission")
	}
	return nil
}

// liveEdit finds an edit of pkg that can still change.
func (s *Server) liveEdit(pkg, id string) (*edit, *apiError) {
	e := s.edits[id]
	switch {
	case e == nil || e.pkg != pkg:
		return nil, errf(404, "NOT_FOUND", "Edit not found: %s.", id)
	case e.gone:
		return nil, errf(400, "FAILED_PRECONDITION", "This Edit has been deleted.")
	}
	return e, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client hung up
}

func (s *Server) insertEdit(w http.ResponseWriter, r *http.Request, pkg, account string) {
	if s.fault(w, r, "edits.insert") {
		return
	}
	s.mu.Lock()
	id := strconv.FormatInt(s.now().UnixNano(), 10) + strconv.Itoa(len(s.edits))
	tracks := map[string][]Release{}
	for t, rel := range s.apps[pkg].tracks {
		tracks[t] = slices.Clone(rel)
	}
	s.edits[id] = &edit{id: id, pkg: pkg, account: account, tracks: tracks, updated: map[string]bool{}}
	exp := s.now().Add(7 * 24 * time.Hour).Unix()
	s.mu.Unlock()
	writeJSON(w, map[string]string{"id": id, "expiryTimeSeconds": strconv.FormatInt(exp, 10)})
}

func (s *Server) getEdit(w http.ResponseWriter, r *http.Request, pkg, id string) {
	if s.fault(w, r, "edits.get") {
		return
	}
	s.mu.Lock()
	_, err := s.liveEdit(pkg, id)
	s.mu.Unlock()
	if err != nil {
		err.write(w)
		return
	}
	writeJSON(w, map[string]string{"id": id})
}

func (s *Server) deleteEdit(w http.ResponseWriter, r *http.Request, pkg, id string) {
	s.mu.Lock()
	e, err := s.liveEdit(pkg, id)
	if err == nil {
		e.gone = true
	}
	s.mu.Unlock()
	if err != nil {
		err.write(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listBundles(w http.ResponseWriter, r *http.Request, pkg, id string) {
	if s.fault(w, r, "bundles.list") {
		return
	}
	s.mu.Lock()
	e, err := s.liveEdit(pkg, id)
	var out []map[string]any
	if err == nil {
		for _, vc := range e.bundles {
			out = append(out, map[string]any{"versionCode": vc})
		}
	}
	s.mu.Unlock()
	if err != nil {
		err.write(w)
		return
	}
	writeJSON(w, map[string]any{"kind": "androidpublisher#bundlesListResponse", "bundles": out})
}

// uploadBundle serves edits.bundles.upload: uploadType=multipart (the JSON
// metadata part, then the bundle), or uploadType=resumable (a session
// opened here, then chunks POSTed to it with Content-Range).
func (s *Server) uploadBundle(w http.ResponseWriter, r *http.Request, pkg, id string) {
	q := r.URL.Query()
	if q.Get("upload_id") == "" && s.fault(w, r, "bundles.upload") {
		return
	}
	s.mu.Lock()
	_, err := s.liveEdit(pkg, id)
	s.mu.Unlock()
	if err != nil {
		err.write(w)
		return
	}
	switch q.Get("uploadType") {
	case "multipart":
		mt, params, perr := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if perr != nil || mt != "multipart/related" {
			errf(400, "INVALID_ARGUMENT", "Invalid multipart request: Content-Type must be multipart/related.").write(w)
			return
		}
		mr := multipart.NewReader(io.LimitReader(r.Body, maxUpload+1<<20), params["boundary"])
		if _, perr := mr.NextPart(); perr != nil { // the metadata
			errf(400, "INVALID_ARGUMENT", "Invalid multipart request: no metadata part.").write(w)
			return
		}
		part, perr := mr.NextPart()
		if perr != nil {
			errf(400, "INVALID_ARGUMENT", "Invalid multipart request: no media part.").write(w)
			return
		}
		data, perr := io.ReadAll(io.LimitReader(part, maxUpload+1))
		if perr != nil {
			return // the client hung up
		}
		s.finishUpload(w, pkg, id, data)
	case "resumable":
		if uid := q.Get("upload_id"); uid != "" {
			s.uploadChunk(w, r, pkg, uid)
			return
		}
		buf := make([]byte, 16)
		rand.Read(buf) //nolint:errcheck // crypto/rand.Read never fails
		uid := hex.EncodeToString(buf)
		s.mu.Lock()
		s.uploads[uid] = &upload{editID: id}
		s.mu.Unlock()
		loc := *r.URL
		lq := loc.Query()
		lq.Set("upload_id", uid)
		loc.RawQuery = lq.Encode()
		w.Header().Set("Location", s.srv.URL+loc.RequestURI())
		w.Header().Set("X-GUploader-UploadID", uid)
		w.WriteHeader(http.StatusOK)
	default:
		errf(400, "INVALID_ARGUMENT", "Invalid upload type %q: use multipart or resumable.", q.Get("uploadType")).write(w)
	}
}

// uploadChunk takes one chunk of a resumable upload: "bytes a-b/*" for a
// middle chunk (answered "308 Resume Incomplete", which a client sending
// X-GUploader-No-308 gets as 200 with X-HTTP-Status-Code-Override: 308),
// "bytes a-b/total" or "bytes */total" for the last.
func (s *Server) uploadChunk(w http.ResponseWriter, r *http.Request, pkg, uid string) {
	if s.fault(w, r, "bundles.upload.chunk") {
		return
	}
	s.mu.Lock()
	up := s.uploads[uid]
	s.mu.Unlock()
	if up == nil {
		errf(404, "NOT_FOUND", "No upload session %s.", uid).write(w)
		return
	}
	cr := strings.TrimPrefix(r.Header.Get("Content-Range"), "bytes ")
	rng, total, ok := strings.Cut(cr, "/")
	if !ok {
		errf(400, "INVALID_ARGUMENT", "Missing or invalid Content-Range header.").write(w)
		return
	}
	chunk, err := io.ReadAll(io.LimitReader(r.Body, maxUpload+1))
	if err != nil {
		return
	}
	s.mu.Lock()
	if rng != "*" {
		first, _, _ := strings.Cut(rng, "-")
		off, _ := strconv.Atoi(first)
		if off != up.data.Len() {
			s.mu.Unlock()
			errf(400, "INVALID_ARGUMENT", "Chunk starts at %d, but %d bytes were received.", off, up.data.Len()).write(w)
			return
		}
		up.data.Write(chunk)
	}
	size := up.data.Len()
	s.mu.Unlock()
	if size > maxUpload {
		errf(400, "INVALID_ARGUMENT", "The file is too large.").write(w)
		return
	}
	if total == "*" {
		w.Header().Set("Range", "bytes=0-"+strconv.Itoa(size-1))
		if r.Header.Get("X-GUploader-No-308") == "yes" {
			w.Header().Set("X-HTTP-Status-Code-Override", "308")
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(308)
		}
		return
	}
	s.mu.Lock()
	delete(s.uploads, uid)
	s.mu.Unlock()
	s.finishUpload(w, pkg, up.editID, up.data.Bytes())
}

// finishUpload adds a received bundle to the edit, as Play checks it.
func (s *Server) finishUpload(w http.ResponseWriter, pkg, id string, data []byte) {
	if len(data) > maxUpload {
		errf(400, "INVALID_ARGUMENT", "The file is too large.").write(w)
		return
	}
	bpkg, vc, berr := readBundle(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.liveEdit(pkg, id)
	switch {
	case err != nil:
	case berr != nil:
		err = errf(400, "INVALID_ARGUMENT", "The Android App Bundle was not valid: %v.", berr)
	case bpkg != pkg:
		err = errf(403, "PERMISSION_DENIED", "Package name %s in the bundle does not match the edit's package %s.", bpkg, pkg)
	case s.apps[pkg].used[vc] || slices.Contains(e.bundles, vc):
		err = errf(403, "PERMISSION_DENIED", "Version code %d has already been used.", vc)
	}
	if err != nil {
		err.write(w)
		return
	}
	e.uploads++
	e.bundles = append(e.bundles, vc)
	s1, s256 := sha1.Sum(data), sha256.Sum256(data)
	writeJSON(w, map[string]any{"versionCode": vc, "sha1": hex.EncodeToString(s1[:]), "sha256": hex.EncodeToString(s256[:])})
}

type wireRelease struct {
	Name         string   `json:"name,omitempty"`
	VersionCodes []string `json:"versionCodes"`
	Status       string   `json:"status"`
	UserFraction float64  `json:"userFraction,omitempty"`
	ReleaseNotes []struct {
		Language string `json:"language"`
		Text     string `json:"text"`
	} `json:"releaseNotes,omitempty"`
}

func toWire(track string, rels []Release) map[string]any {
	out := []map[string]any{}
	for _, r := range rels {
		codes := []string{}
		for _, c := range r.VersionCodes {
			codes = append(codes, strconv.FormatInt(c, 10))
		}
		m := map[string]any{"versionCodes": codes, "status": r.Status}
		if r.UserFraction > 0 {
			m["userFraction"] = r.UserFraction
		}
		out = append(out, m)
	}
	return map[string]any{"track": track, "releases": out}
}

func (s *Server) listTracks(w http.ResponseWriter, r *http.Request, pkg, id string) {
	if s.fault(w, r, "tracks.list") {
		return
	}
	s.mu.Lock()
	e, err := s.liveEdit(pkg, id)
	var tracks []map[string]any
	if err == nil {
		names := make([]string, 0, len(e.tracks))
		for t := range e.tracks {
			names = append(names, t)
		}
		slices.Sort(names)
		for _, t := range names {
			tracks = append(tracks, toWire(t, e.tracks[t]))
		}
	}
	s.mu.Unlock()
	if err != nil {
		err.write(w)
		return
	}
	writeJSON(w, map[string]any{"kind": "androidpublisher#tracksListResponse", "tracks": tracks})
}

func (s *Server) updateTrack(w http.ResponseWriter, r *http.Request, pkg, id, track string) {
	if s.fault(w, r, "tracks.update") {
		return
	}
	var body struct {
		Track    string        `json:"track"`
		Releases []wireRelease `json:"releases"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		errf(400, "INVALID_ARGUMENT", "Invalid JSON payload received. %v", err).write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.liveEdit(pkg, id)
	if err != nil {
		err.write(w)
		return
	}
	if _, ok := e.tracks[track]; !ok {
		errf(404, "NOT_FOUND", "Track not found: %s.", track).write(w)
		return
	}
	var rels []Release
	for _, wr := range body.Releases {
		rel := Release{Status: wr.Status, UserFraction: wr.UserFraction}
		switch wr.Status {
		case "completed", "draft", "halted":
			if wr.UserFraction != 0 {
				errf(400, "INVALID_ARGUMENT", "A release with status %s cannot have a user fraction.", wr.Status).write(w)
				return
			}
		case "inProgress":
			if wr.UserFraction <= 0 || wr.UserFraction >= 1 {
				errf(400, "INVALID_ARGUMENT", "A release with status inProgress must have a user fraction between 0 and 1 (exclusive).").write(w)
				return
			}
		default:
			errf(400, "INVALID_ARGUMENT", "Invalid value at 'track.releases[0].status' (%s).", wr.Status).write(w)
			return
		}
		for _, c := range wr.VersionCodes {
			vc, perr := strconv.ParseInt(c, 10, 64)
			if perr != nil || !slices.Contains(e.bundles, vc) && !s.apps[pkg].used[vc] {
				errf(403, "PERMISSION_DENIED", "Version code %s is not available in this edit: upload it first.", c).write(w)
				return
			}
			rel.VersionCodes = append(rel.VersionCodes, vc)
		}
		for _, n := range wr.ReleaseNotes {
			if rel.ReleaseNotes == nil {
				rel.ReleaseNotes = map[string]string{}
			}
			rel.ReleaseNotes[n.Language] = n.Text
		}
		rels = append(rels, rel)
	}
	e.tracks[track] = rels
	e.updated[track] = true
	writeJSON(w, toWire(track, rels))
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request, pkg, id string) {
	if s.fault(w, r, "edits.commit") {
		return
	}
	notForReview := r.URL.Query().Get("changesNotSentForReview") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.liveEdit(pkg, id)
	if err != nil {
		err.write(w)
		return
	}
	a := s.apps[pkg]
	c := Commit{Package: pkg, EditID: id, Account: e.account, ChangesNotSentForReview: notForReview, Tracks: map[string][]Release{}}
	for t := range e.updated {
		a.tracks[t] = e.tracks[t]
		c.Tracks[t] = e.tracks[t]
	}
	for _, vc := range e.bundles {
		a.used[vc] = true
	}
	e.gone = true
	s.commits = append(s.commits, c)
	writeJSON(w, map[string]string{"id": id})
}
