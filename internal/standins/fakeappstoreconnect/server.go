// Package fakeappstoreconnect stands in for App Store Connect, which
// cannot be reached from here: a real HTTP server on 127.0.0.1 that
// implements the App Store Connect API's resources a submission uses —
// apps, buildUploads, buildUploadFiles with their upload operations (the
// parts are PUT to the stand-in itself), builds and betaGroups — in their
// JSON:API shapes, status codes and error bodies, behind App Store
// Connect's ES256 token checks. Processing advances per read, so tests
// need no sleeps; faults (5xx, 429, a lost answer) are injected per
// request. What it received is recorded for tests to check. README.md
// says what it implements and what it does not.
package fakeappstoreconnect

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key is an API key the stand-in accepts: the key id (kid), its issuer
// and its public key.
type Key struct {
	IssuerID, KeyID string
	Public          *ecdsa.PublicKey
}

// App is an app in the stand-in's App Store Connect, with its TestFlight
// groups (by name).
type App struct {
	ID, BundleID, Name string
	Groups             []string
}

// StateDetail is a finding about an upload (an ITMS code and its text).
type StateDetail struct {
	Code        string `json:"code"`
	Description string `json:"description"`
}

// Config is the stand-in's App Store Connect.
type Config struct {
	Keys []Key
	Apps []App
	// PartSize is the length of each upload operation but the last
	// (0: 5 MiB); MaxFileSize bounds an upload file (0: 64 MiB).
	PartSize, MaxFileSize int64
	// UploadPolls and BuildPolls are how many reads of a processing build
	// upload, then of a processing build, end their processing (0: 1).
	UploadPolls, BuildPolls int
	// UploadErrors, when set, make every build upload's processing end
	// FAILED with these findings; BuildState is how a build's processing
	// ends ("": VALID; or FAILED, INVALID).
	UploadErrors []StateDetail
	BuildState   string
	Now          func() time.Time // nil: time.Now
}

// Fault replaces the stand-in's answers to requests whose method is
// Method and whose path starts with Path: Times of them (negative: all)
// get Status with App Store Connect's error body. With Lost set the
// request is carried out first and only its answer is lost.
type Fault struct {
	Method, Path string
	Status       int
	Times        int
	Lost         bool
}

// Request is a request the stand-in received.
type Request struct {
	Method, Path, Query string
	// Refused is why the token was refused ("" when it was accepted or
	// none was needed); Authorization says whether the request had one.
	Refused       string
	Authorization bool
	Status        int
}

// Upload is a build upload as the stand-in holds it.
type Upload struct {
	ID, AppID, ShortVersion, BuildNumber, Platform, State string
	Files                                                 []File
	BuildID, BuildState                                   string
	Groups                                                []string // the TestFlight groups the build is in
}

// File is a build upload file: what was declared, what arrived.
type File struct {
	ID, AssetType, Name, UTI, State string
	Size                            int64
	PartsPut                        int    // part uploads received, repeats included
	SHA256                          string // of the bytes received, once complete
	Checksum                        string // the client's, as it committed the file
}

// Server is the running stand-in.
type Server struct {
	URL string

	srv  *httptest.Server
	cfg  Config
	keys map[string]Key

	mu       sync.Mutex
	uploads  []*upload
	faults   []*Fault
	requests []Request
	tokens   []string
}

type upload struct {
	Upload
	polls, buildPolls int
	files             []*file
}

type file struct {
	File
	token string
	data  []byte
	got   []bool // parts received
}

// Start runs a stand-in on 127.0.0.1. Close stops it.
func Start(cfg Config) *Server {
	s := &Server{cfg: cfg, keys: map[string]Key{}}
	for _, k := range cfg.Keys {
		s.keys[k.KeyID] = k
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/apps", s.listApps)
	mux.HandleFunc("GET /v1/apps/{id}", s.getApp)
	mux.HandleFunc("GET /v1/apps/{id}/buildUploads", s.listAppUploads)
	mux.HandleFunc("POST /v1/buildUploads", s.createUpload)
	mux.HandleFunc("GET /v1/buildUploads/{id}", s.getUpload)
	mux.HandleFunc("GET /v1/buildUploads/{id}/buildUploadFiles", s.listFiles)
	mux.HandleFunc("POST /v1/buildUploadFiles", s.createFile)
	mux.HandleFunc("GET /v1/buildUploadFiles/{id}", s.getFile)
	mux.HandleFunc("PATCH /v1/buildUploadFiles/{id}", s.commitFile)
	mux.HandleFunc("GET /v1/builds/{id}", s.getBuild)
	mux.HandleFunc("GET /v1/betaGroups", s.listGroups)
	mux.HandleFunc("POST /v1/betaGroups/{id}/relationships/builds", s.addBuildToGroup)
	mux.HandleFunc("PUT /upload/{file}/{part}", s.putPart)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "The specified resource does not exist", "The path provided does not match a defined resource type.")
	})
	s.srv = httptest.NewServer(s.front(mux))
	s.URL = s.srv.URL
	return s
}

// Close stops the server and waits for its requests to end.
func (s *Server) Close() { s.srv.Close() }

// Fail injects a fault; it applies to the requests that follow.
func (s *Server) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Tokens are the bearer tokens received so far (for tests that check they
// were not written anywhere).
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokens)
}

// Uploads are the build uploads created so far.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Upload
	for _, u := range s.uploads {
		c := u.Upload
		c.Groups = slices.Clone(u.Groups)
		c.Files = nil
		for _, f := range u.files {
			c.Files = append(c.Files, f.File)
		}
		out = append(out, c)
	}
	return out
}

func (s *Server) partSize() int64 {
	if s.cfg.PartSize <= 0 {
		return 5 << 20
	}
	return s.cfg.PartSize
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// front checks the token (the upload URLs carry their own), applies the
// faults and records each request.
func (s *Server) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization") != ""}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.mu.Lock()
			rec.Status = sw.status
			s.requests = append(s.requests, rec)
			s.mu.Unlock()
		}()
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && len(tok) <= maxToken {
				s.mu.Lock()
				s.tokens = append(s.tokens, tok)
				s.mu.Unlock()
			}
			if rec.Refused = s.authorize(r); rec.Refused != "" {
				apiError(sw, http.StatusUnauthorized, "NOT_AUTHORIZED", "Authentication credentials are missing or invalid.",
					"Provide a properly configured and signed bearer token, and make sure that it has not expired. Learn more about Generating Tokens for API Requests https://developer.apple.com/go/?id=api-generating-tokens")
				return
			}
		}
		if f := s.fault(r); f != nil {
			if f.Lost {
				next.ServeHTTP(httptest.NewRecorder(), r)
			}
			faultAnswer(sw, f.Status)
			return
		}
		next.ServeHTTP(sw, r)
	})
}

func (s *Server) fault(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.Times != 0 && f.Method == r.Method && strings.HasPrefix(r.URL.Path, f.Path) {
			if f.Times > 0 {
				f.Times--
			}
			c := *f
			return &c
		}
	}
	return nil
}

func faultAnswer(w http.ResponseWriter, status int) {
	switch {
	case status == http.StatusTooManyRequests:
		apiError(w, status, "RATE_LIMIT_EXCEEDED", "The request rate limit has been reached.", "We've received too many requests for this API. Please wait and try again or slow down your request rate.")
	case status >= 500:
		apiError(w, status, "UNEXPECTED_ERROR", "An unexpected error occurred.", "An unexpected error occurred on the server side. If this issue continues, contact us at https://developer.apple.com/contact/.")
	default:
		apiError(w, status, "FAULT", http.StatusText(status), "injected")
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// apiError writes App Store Connect's ErrorResponse.
func apiError(w http.ResponseWriter, status int, code, title, detail string) {
	writeJSON(w, status, map[string]any{"errors": []map[string]any{{
		"id": newID(), "status": strconv.Itoa(status), "code": code, "title": title, "detail": detail,
	}}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// maxJSON bounds a request body.
const maxJSON = 1 << 20

// readJSON decodes a JSON:API request document, answering 400 or 409 as
// App Store Connect does when it is not one.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSON))
	if err != nil {
		apiError(w, http.StatusRequestEntityTooLarge, "ENTITY_TOO_LARGE", "The request entity is too large.", err.Error())
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		apiError(w, http.StatusBadRequest, "PARAMETER_ERROR.INVALID", "The request entity is not valid JSON.", err.Error())
		return false
	}
	return true
}

func (s *Server) app(id string) *App {
	for i := range s.cfg.Apps {
		if s.cfg.Apps[i].ID == id {
			return &s.cfg.Apps[i]
		}
	}
	return nil
}

func appJSON(a *App) map[string]any {
	return map[string]any{"type": "apps", "id": a.ID, "attributes": map[string]any{"bundleId": a.BundleID, "name": a.Name, "primaryLocale": "en-US"}}
}

func notFound(w http.ResponseWriter, typ, id string) {
	apiError(w, http.StatusNotFound, "NOT_FOUND", "The specified resource does not exist", fmt.Sprintf("There is no resource of type '%s' with id '%s'", typ, id))
}

func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	a := s.app(r.PathValue("id"))
	if a == nil {
		notFound(w, "apps", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": appJSON(a)})
}

func (s *Server) listApps(w http.ResponseWriter, r *http.Request) {
	data := []any{}
	want := r.URL.Query().Get("filter[bundleId]")
	for i := range s.cfg.Apps {
		if want == "" || s.cfg.Apps[i].BundleID == want {
			data = append(data, appJSON(&s.cfg.Apps[i]))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (s *Server) uploadJSON(u *upload) map[string]any {
	var build any
	if u.BuildID != "" {
		build = map[string]any{"type": "builds", "id": u.BuildID}
	}
	errs := []StateDetail{}
	if u.State == "FAILED" {
		errs = s.cfg.UploadErrors
	}
	return map[string]any{
		"type": "buildUploads", "id": u.ID,
		"attributes": map[string]any{
			"cfBundleShortVersionString": u.ShortVersion, "cfBundleVersion": u.BuildNumber, "platform": u.Platform,
			"state": map[string]any{"state": u.State, "errors": errs, "warnings": []any{}, "infos": []any{}},
		},
		"relationships": map[string]any{"build": map[string]any{"data": build}},
		"links":         map[string]any{"self": s.URL + "/v1/buildUploads/" + u.ID},
	}
}

func (s *Server) findUpload(id string) *upload {
	for _, u := range s.uploads {
		if u.ID == id {
			return u
		}
	}
	return nil
}

func (s *Server) listAppUploads(w http.ResponseWriter, r *http.Request) {
	if s.app(r.PathValue("id")) == nil {
		notFound(w, "apps", r.PathValue("id"))
		return
	}
	q := r.URL.Query()
	match := func(key, v string) bool { f := q.Get(key); return f == "" || slices.Contains(strings.Split(f, ","), v) }
	s.mu.Lock()
	defer s.mu.Unlock()
	data := []any{}
	for _, u := range s.uploads {
		if u.AppID == r.PathValue("id") && match("filter[cfBundleShortVersionString]", u.ShortVersion) &&
			match("filter[cfBundleVersion]", u.BuildNumber) && match("filter[platform]", u.Platform) && match("filter[state]", u.State) {
			data = append(data, s.uploadJSON(u))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

type linkage struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (s *Server) createUpload(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Short    string `json:"cfBundleShortVersionString"`
				Build    string `json:"cfBundleVersion"`
				Platform string `json:"platform"`
			} `json:"attributes"`
			Relationships struct {
				App struct {
					Data *linkage `json:"data"`
				} `json:"app"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	d := req.Data
	switch {
	case d.Type != "buildUploads":
		apiError(w, http.StatusConflict, "ENTITY_ERROR.INCLUDED.INVALID_TYPE", "The provided entity has an invalid type.", "The type must be 'buildUploads'.")
		return
	case d.Attributes.Short == "" || d.Attributes.Build == "":
		apiError(w, http.StatusUnprocessableEntity, "ENTITY_ERROR.ATTRIBUTE.REQUIRED", "The provided entity is missing a required attribute", "You must provide a value for the attributes 'cfBundleShortVersionString' and 'cfBundleVersion' with this request")
		return
	case !slices.Contains([]string{"IOS", "MAC_OS", "TV_OS", "VISION_OS"}, d.Attributes.Platform):
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", fmt.Sprintf("'%s' is not a valid value for the attribute 'platform'.", d.Attributes.Platform))
		return
	case d.Relationships.App.Data == nil || d.Relationships.App.Data.Type != "apps":
		apiError(w, http.StatusUnprocessableEntity, "ENTITY_ERROR.RELATIONSHIP.REQUIRED", "The provided entity is missing a required relationship", "You must provide a value for the relationship 'app' with this request")
		return
	case s.app(d.Relationships.App.Data.ID) == nil:
		apiError(w, http.StatusConflict, "ENTITY_ERROR.RELATIONSHIP.INVALID", "The provided entity includes a relationship with an invalid value", fmt.Sprintf("'%s' is not a valid id for the relationship 'app'", d.Relationships.App.Data.ID))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	appID := d.Relationships.App.Data.ID
	for _, u := range s.uploads {
		if u.AppID == appID && u.Platform == d.Attributes.Platform && u.ShortVersion == d.Attributes.Short && u.BuildNumber == d.Attributes.Build && u.State != "FAILED" {
			apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID.DUPLICATE", "The provided entity includes an attribute with a value that has already been used",
				fmt.Sprintf("Redundant Binary Upload. You've already uploaded a build with build number '%s' for version number '%s'. Make sure you increment the build string before you upload your app to App Store Connect.", d.Attributes.Build, d.Attributes.Short))
			return
		}
	}
	u := &upload{Upload: Upload{ID: newID(), AppID: appID, ShortVersion: d.Attributes.Short, BuildNumber: d.Attributes.Build, Platform: d.Attributes.Platform, State: "AWAITING_UPLOAD"}}
	s.uploads = append(s.uploads, u)
	writeJSON(w, http.StatusCreated, map[string]any{"data": s.uploadJSON(u)})
}

// getUpload answers a read of a build upload; a processing one advances.
func (s *Server) getUpload(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.findUpload(r.PathValue("id"))
	if u == nil {
		notFound(w, "buildUploads", r.PathValue("id"))
		return
	}
	if u.State == "PROCESSING" {
		u.polls++
		if u.polls >= max(s.cfg.UploadPolls, 1) {
			s.finishUpload(u)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": s.uploadJSON(u)})
}

func (s *Server) finishUpload(u *upload) {
	if len(s.cfg.UploadErrors) > 0 {
		u.State = "FAILED"
		for _, f := range u.files {
			f.State = "FAILED"
		}
		return
	}
	u.State = "COMPLETE"
	for _, f := range u.files {
		f.State = "COMPLETE"
	}
	u.BuildID = newID()
	u.BuildState = "PROCESSING"
}

func (s *Server) fileJSON(f *file) map[string]any {
	ops := []any{}
	if f.State == "AWAITING_UPLOAD" {
		part := s.partSize()
		for i, off := 0, int64(0); off < f.Size; i, off = i+1, off+part {
			ops = append(ops, map[string]any{
				"method": "PUT", "url": fmt.Sprintf("%s/upload/%s/%d?token=%s", s.URL, f.ID, i+1, f.token),
				"offset": off, "length": min(part, f.Size-off), "partNumber": i + 1,
				"requestHeaders": []any{map[string]any{"name": "Content-Type", "value": "application/octet-stream"}},
				"expiration":     s.now().Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339),
			})
		}
	}
	return map[string]any{
		"type": "buildUploadFiles", "id": f.ID,
		"attributes": map[string]any{
			"assetType": f.AssetType, "fileName": f.Name, "fileSize": f.Size, "uti": f.UTI,
			"assetDeliveryState": map[string]any{"state": f.State, "errors": []any{}, "warnings": []any{}},
			"uploadOperations":   ops,
		},
	}
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.findUpload(r.PathValue("id"))
	if u == nil {
		notFound(w, "buildUploads", r.PathValue("id"))
		return
	}
	data := []any{}
	for _, f := range u.files {
		data = append(data, s.fileJSON(f))
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (s *Server) createFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				AssetType string `json:"assetType"`
				FileName  string `json:"fileName"`
				FileSize  int64  `json:"fileSize"`
				UTI       string `json:"uti"`
			} `json:"attributes"`
			Relationships struct {
				BuildUpload struct {
					Data *linkage `json:"data"`
				} `json:"buildUpload"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	a := req.Data.Attributes
	maxSize := s.cfg.MaxFileSize
	if maxSize <= 0 {
		maxSize = 64 << 20
	}
	switch {
	case req.Data.Type != "buildUploadFiles":
		apiError(w, http.StatusConflict, "ENTITY_ERROR.INCLUDED.INVALID_TYPE", "The provided entity has an invalid type.", "The type must be 'buildUploadFiles'.")
		return
	case !slices.Contains([]string{"ASSET", "ASSET_DESCRIPTION", "ASSET_SPI"}, a.AssetType):
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", fmt.Sprintf("'%s' is not a valid value for the attribute 'assetType'.", a.AssetType))
		return
	case a.FileName == "" || a.FileSize <= 0 || a.FileSize > maxSize:
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", fmt.Sprintf("The file '%s' of %d bytes cannot be uploaded (at most %d bytes).", a.FileName, a.FileSize, maxSize))
		return
	case a.AssetType == "ASSET" && a.UTI != "com.apple.ipa" && a.UTI != "com.apple.pkg":
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", fmt.Sprintf("'%s' is not a valid value for the attribute 'uti'.", a.UTI))
		return
	case req.Data.Relationships.BuildUpload.Data == nil:
		apiError(w, http.StatusUnprocessableEntity, "ENTITY_ERROR.RELATIONSHIP.REQUIRED", "The provided entity is missing a required relationship", "You must provide a value for the relationship 'buildUpload' with this request")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.findUpload(req.Data.Relationships.BuildUpload.Data.ID)
	switch {
	case u == nil:
		apiError(w, http.StatusConflict, "ENTITY_ERROR.RELATIONSHIP.INVALID", "The provided entity includes a relationship with an invalid value", fmt.Sprintf("'%s' is not a valid id for the relationship 'buildUpload'", req.Data.Relationships.BuildUpload.Data.ID))
		return
	case u.State != "AWAITING_UPLOAD":
		apiError(w, http.StatusConflict, "ENTITY_ERROR.STATE_INVALID", "The request cannot be fulfilled because of the state of another resource.", "The build upload is "+u.State+".")
		return
	case slices.ContainsFunc(u.files, func(f *file) bool { return f.AssetType == a.AssetType }):
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID.DUPLICATE", "The provided entity includes an attribute with a value that has already been used", "The build upload already has a file of type "+a.AssetType+".")
		return
	}
	part := s.partSize()
	f := &file{File: File{ID: newID(), AssetType: a.AssetType, Name: a.FileName, UTI: a.UTI, Size: a.FileSize, State: "AWAITING_UPLOAD"},
		token: newID(), data: make([]byte, a.FileSize), got: make([]bool, (a.FileSize+part-1)/part)}
	u.files = append(u.files, f)
	writeJSON(w, http.StatusCreated, map[string]any{"data": s.fileJSON(f)})
}

func (s *Server) findFile(id string) (*upload, *file) {
	for _, u := range s.uploads {
		for _, f := range u.files {
			if f.ID == id {
				return u, f
			}
		}
	}
	return nil, nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, f := s.findFile(r.PathValue("id"))
	if f == nil {
		notFound(w, "buildUploadFiles", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": s.fileJSON(f)})
}

// putPart takes one upload operation's bytes. Like a signed storage URL it
// needs no token, only the URL's own; it refuses a body of another length.
func (s *Server) putPart(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	_, f := s.findFile(r.PathValue("file"))
	s.mu.Unlock()
	n, err := strconv.Atoi(r.PathValue("part"))
	if f == nil || err != nil || n < 1 || n > len(f.got) || r.URL.Query().Get("token") != f.token {
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	part := s.partSize()
	off := int64(n-1) * part
	length := min(part, f.Size-off)
	if r.ContentLength != length || r.Header.Get("Content-Type") != "application/octet-stream" {
		http.Error(w, fmt.Sprintf("part %d must be %d bytes of application/octet-stream", n, length), http.StatusBadRequest)
		return
	}
	buf := make([]byte, length)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		http.Error(w, "IncompleteBody", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.State != "AWAITING_UPLOAD" {
		http.Error(w, "the file is "+f.State, http.StatusConflict)
		return
	}
	copy(f.data[off:], buf)
	f.got[n-1] = true
	f.PartsPut++
	sum := sha256.Sum256(buf)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	w.WriteHeader(http.StatusOK)
}

// commitFile takes "uploaded": every part must have arrived and the
// checksum must be the bytes'. The upload then processes.
func (s *Server) commitFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			Attributes struct {
				Uploaded  *bool `json:"uploaded"`
				Checksums *struct {
					File *struct {
						Hash      string `json:"hash"`
						Algorithm string `json:"algorithm"`
					} `json:"file"`
				} `json:"sourceFileChecksums"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, f := s.findFile(r.PathValue("id"))
	if f == nil {
		notFound(w, "buildUploadFiles", r.PathValue("id"))
		return
	}
	if req.Data.Type != "buildUploadFiles" || req.Data.ID != f.ID {
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ID.INVALID", "The provided entity id is invalid", "The resource id in the request does not match the path.")
		return
	}
	if req.Data.Attributes.Uploaded == nil || !*req.Data.Attributes.Uploaded {
		writeJSON(w, http.StatusOK, map[string]any{"data": s.fileJSON(f)})
		return
	}
	if f.State != "AWAITING_UPLOAD" {
		writeJSON(w, http.StatusOK, map[string]any{"data": s.fileJSON(f)}) // committed before: the same answer
		return
	}
	if missing := slices.Index(f.got, false); missing >= 0 {
		apiError(w, http.StatusConflict, "ENTITY_ERROR.STATE_INVALID", "The request cannot be fulfilled because of the state of another resource.", fmt.Sprintf("Part %d of the file has not been uploaded.", missing+1))
		return
	}
	sum := sha256.Sum256(f.data)
	f.SHA256 = hex.EncodeToString(sum[:])
	c := req.Data.Attributes.Checksums
	if c == nil || c.File == nil || c.File.Algorithm != "SHA_256" && c.File.Algorithm != "MD5" {
		apiError(w, http.StatusUnprocessableEntity, "ENTITY_ERROR.ATTRIBUTE.REQUIRED", "The provided entity is missing a required attribute", "You must provide a value for the attribute 'sourceFileChecksums' with this request")
		return
	}
	f.Checksum = c.File.Hash
	if c.File.Algorithm == "SHA_256" && !strings.EqualFold(c.File.Hash, f.SHA256) {
		apiError(w, http.StatusConflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", "The checksum of the uploaded file does not match 'sourceFileChecksums'.")
		return
	}
	f.State = "UPLOAD_COMPLETE"
	f.data = nil
	if !slices.ContainsFunc(u.files, func(f *file) bool { return f.AssetType == "ASSET" && f.State == "AWAITING_UPLOAD" }) {
		u.State = "PROCESSING"
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": s.fileJSON(f)})
}

// getBuild answers a read of a build; a processing one advances.
func (s *Server) getBuild(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.uploads, func(u *upload) bool { return u.BuildID == r.PathValue("id") })
	if i < 0 {
		notFound(w, "builds", r.PathValue("id"))
		return
	}
	u := s.uploads[i]
	if u.BuildState == "PROCESSING" {
		u.buildPolls++
		if u.buildPolls >= max(s.cfg.BuildPolls, 1) {
			u.BuildState = s.cfg.BuildState
			if u.BuildState == "" {
				u.BuildState = "VALID"
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{
		"type": "builds", "id": u.BuildID,
		"attributes": map[string]any{"version": u.BuildNumber, "processingState": u.BuildState, "expired": false},
		"relationships": map[string]any{
			"app":         map[string]any{"data": map[string]any{"type": "apps", "id": u.AppID}},
			"buildUpload": map[string]any{"data": map[string]any{"type": "buildUploads", "id": u.ID}},
		},
	}})
}

// groupID is a TestFlight group's id: the app's id and the group's index.
func groupID(appID string, i int) string { return fmt.Sprintf("%s-g%d", appID, i+1) }

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := []any{}
	for _, a := range s.cfg.Apps {
		if f := q.Get("filter[app]"); f != "" && f != a.ID {
			continue
		}
		for i, name := range a.Groups {
			if f := q.Get("filter[name]"); f != "" && f != name {
				continue
			}
			data = append(data, map[string]any{"type": "betaGroups", "id": groupID(a.ID, i),
				"attributes": map[string]any{"name": name, "isInternalGroup": false}})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (s *Server) addBuildToGroup(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data []linkage `json:"data"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	var app *App
	name := ""
	for ai := range s.cfg.Apps {
		for i, g := range s.cfg.Apps[ai].Groups {
			if groupID(s.cfg.Apps[ai].ID, i) == r.PathValue("id") {
				app, name = &s.cfg.Apps[ai], g
			}
		}
	}
	if app == nil {
		notFound(w, "betaGroups", r.PathValue("id"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range req.Data {
		i := slices.IndexFunc(s.uploads, func(u *upload) bool { return l.Type == "builds" && u.BuildID == l.ID && u.AppID == app.ID })
		if i < 0 {
			apiError(w, http.StatusConflict, "ENTITY_ERROR.RELATIONSHIP.INVALID", "The provided entity includes a relationship with an invalid value", fmt.Sprintf("'%s' is not a valid id for the relationship 'builds'", l.ID))
			return
		}
		if s.uploads[i].BuildState != "VALID" {
			apiError(w, http.StatusUnprocessableEntity, "ENTITY_ERROR.RELATIONSHIP.INVALID", "The provided entity includes a relationship with an invalid value", "The build is not ready for testing: its processing state is "+s.uploads[i].BuildState+".")
			return
		}
	}
	for _, l := range req.Data {
		for _, u := range s.uploads {
			if u.BuildID == l.ID && !slices.Contains(u.Groups, name) {
				u.Groups = append(u.Groups, name)
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
