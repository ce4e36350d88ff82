package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error is a non-2xx answer from the controller.
type Error struct {
	Status  int
	Code    string
	Message string
	Length  *int64 // on 416 answers to a log append
	Budget  string // on 429 answers: the budget spent (ErrorResponse.Budget)
	// RetryAfter is the answer's Retry-After (429, 503): how long the
	// controller asked the client to wait. Retry honours it.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("controller answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// StatusOf returns the HTTP status of an *Error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Client calls the controller. Credentials that change during a session
// (worker token, VM token) are passed per call; the API key and build token
// are fixed per client.
type Client struct {
	BaseURL    string
	APIKey     string
	BuildToken string // used when APIKey is empty (build-scoped access)
	HTTP       *http.Client
	UserAgent  string
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

type header map[string]string

// NewRequest builds a request to path on the controller carrying the
// client's credential, for calls this package has no method for. Empty
// header values are skipped.
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader, h map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if c.APIKey != "" {
		req.Header.Set(HeaderAPIKey, c.APIKey)
	} else if c.BuildToken != "" {
		req.Header.Set(HeaderBuildToken, c.BuildToken)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// Do sends req and returns the response when its status is 2xx (or 206),
// else an *Error built from the body.
//
// A download the controller redirects to its object store (a 307 to a
// presigned URL) is followed without the controller credentials, and the
// redirect's X-Checksum-Sha256 is kept on the final response.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	hc := *c.httpClient()
	hc.CheckRedirect = withoutCredentials(hc.CheckRedirect)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if resp.Header.Get(HeaderChecksum) == "" {
			for prev := resp.Request.Response; prev != nil; prev = prev.Request.Response {
				if sum := prev.Header.Get(HeaderChecksum); sum != "" {
					resp.Header.Set(HeaderChecksum, sum)
					break
				}
			}
		}
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

// credentialHeaders are the controller's credentials, which Go's client
// would otherwise forward to any host a redirect names.
var credentialHeaders = []string{HeaderAPIKey, HeaderBuildToken, HeaderWorkerToken, HeaderVMToken, HeaderOTP, "Authorization", "Cookie"}

// withoutCredentials wraps a redirect policy (nil: Go's default of at most
// 10) so that a redirect to another origin (scheme, host or port) carries no
// credentials, and neither does any later hop of the chain, even one back
// to the controller: a host that was handed the request must not be able
// to send it on, credentials restored, to a path of its choosing.
func withoutCredentials(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		left := !sameOrigin(req.URL, via[0].URL)
		for _, v := range via[1:] {
			left = left || !sameOrigin(v.URL, via[0].URL)
		}
		if left {
			for _, h := range credentialHeaders {
				req.Header.Del(h)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// sameOrigin compares scheme, host and port (an explicit default port
// counts as another origin: credentials are dropped, never added).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

func decodeError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header, time.Now())}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body ErrorResponse
	if json.Unmarshal(b, &body) == nil && (body.Error != "" || body.Code != "") {
		e.Code, e.Message, e.Length, e.Budget = body.Code, body.Error, body.Length, body.Budget
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}

func (c *Client) call(ctx context.Context, method, path string, in, out any, h header) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		if h == nil {
			h = header{}
		}
		h["Content-Type"] = "application/json"
	}
	req, err := c.NewRequest(ctx, method, path, body, h)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := DecodeAnswer(resp.Body, out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// Register registers (or re-registers) a worker.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (RegisterResponse, error) {
	var out RegisterResponse
	return out, c.call(ctx, http.MethodPost, "/api/workers/register", req, &out, nil)
}

// Poll long-polls for a job for up to wait.
func (c *Client) Poll(ctx context.Context, workerToken string, wait time.Duration) (PollResponse, error) {
	var out PollResponse
	path := "/api/workers/poll?wait=" + strconv.Itoa(int(wait.Seconds()))
	return out, c.call(ctx, http.MethodGet, path, nil, &out, header{HeaderWorkerToken: workerToken})
}

// Heartbeat renews a lease.
func (c *Client) Heartbeat(ctx context.Context, workerToken string, req HeartbeatRequest) (HeartbeatResponse, error) {
	var out HeartbeatResponse
	return out, c.call(ctx, http.MethodPost, "/api/workers/heartbeat", req, &out, header{HeaderWorkerToken: workerToken})
}

// ReportCache tells the controller which dependency caches the worker
// holds (PUT /api/workers/cache).
func (c *Client) ReportCache(ctx context.Context, workerToken string, report WorkerCache) error {
	return c.call(ctx, http.MethodPut, "/api/workers/cache", report, nil, header{HeaderWorkerToken: workerToken})
}

// WatchCancel waits up to wait for a cancel of build id, which runs on this
// worker (GET /api/workers/builds/{id}/cancel).
func (c *Client) WatchCancel(ctx context.Context, workerToken, id string, wait time.Duration) (CancelWatchResponse, error) {
	var out CancelWatchResponse
	path := "/api/workers/builds/" + url.PathEscape(id) + "/cancel?wait=" + strconv.Itoa(int(wait.Seconds()))
	return out, c.call(ctx, http.MethodGet, path, nil, &out, header{HeaderWorkerToken: workerToken})
}

// Unregister ends the worker instance.
func (c *Client) Unregister(ctx context.Context, workerToken string) (UnregisterResponse, error) {
	var out UnregisterResponse
	return out, c.call(ctx, http.MethodPost, "/api/workers/unregister", struct{}{}, &out, header{HeaderWorkerToken: workerToken})
}

// Result is a worker's report of an attempt's end for Upload.
type Result struct {
	BuildID, AttemptID, LeaseToken string
	Success                        bool
	ErrorMessage, ErrorCode        string
	Retryable                      bool
	FileName                       string    // artifact name; with File
	File                           io.Reader // optional artifact, streamed
	SHA256                         string    // optional hex checksum of File, verified by the controller
}

// Upload reports an attempt's result, streaming the artifact if any.
func (c *Client) Upload(ctx context.Context, workerToken string, r Result) (ResultResponse, error) {
	fields := [][2]string{{"build_id", r.BuildID}, {"attempt_id", r.AttemptID}, {"lease_token", r.LeaseToken},
		{"success", strconv.FormatBool(r.Success)}, {"retryable", strconv.FormatBool(r.Retryable)},
		{"error_message", r.ErrorMessage}, {"error_code", r.ErrorCode}}
	var files []filePart
	if r.File != nil {
		files = append(files, filePart{field: "result", name: r.FileName, r: r.File})
	}
	var out ResultResponse
	return out, c.multipart(ctx, "/api/workers/upload", fields, files, header{HeaderWorkerToken: workerToken, HeaderChecksum: r.SHA256}, &out)
}

// filePart is a part written after the fields: a file, or with no name a
// form field whose value is streamed.
type filePart struct {
	field, name string
	r           io.Reader
}

// lazyJSON reads as v's JSON, encoded on the first Read.
type lazyJSON struct {
	v any
	r io.Reader
}

func (l *lazyJSON) Read(p []byte) (int, error) {
	if l.r == nil {
		b, err := json.Marshal(l.v)
		if err != nil {
			return 0, fmt.Errorf("encode the build spec: %w", err)
		}
		l.r = bytes.NewReader(b)
	}
	return l.r.Read(p)
}

// multipart streams fields then files through a pipe: nothing is buffered whole.
func (c *Client) multipart(ctx context.Context, path string, fields [][2]string, files []filePart, h header, out any) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for _, f := range fields {
				if f[1] == "" {
					continue
				}
				if err := mw.WriteField(f[0], f[1]); err != nil {
					return err
				}
			}
			for _, f := range files {
				create := func() (io.Writer, error) { return mw.CreateFormFile(f.field, f.name) }
				if f.name == "" {
					create = func() (io.Writer, error) { return mw.CreateFormField(f.field) }
				}
				w, err := create()
				if err != nil {
					return err
				}
				if _, err := io.Copy(w, f.r); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	if h == nil {
		h = header{}
	}
	h["Content-Type"] = mw.FormDataContentType()
	req, err := c.NewRequest(ctx, http.MethodPost, path, pr, h)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := DecodeAnswer(resp.Body, out); err != nil {
		return fmt.Errorf("decode POST %s answer: %w", path, err)
	}
	return nil
}

// SubmitRequest is a build submission.
type SubmitRequest struct {
	Platform       string
	Profile        string
	Priority       *int
	TimeoutSeconds int
	Source         io.Reader // tar.gz or zip, streamed
	SourceName     string
	// SourceTicket, instead of Source, names a source already sent to the
	// store (StartSourceUpload, SendDirect): field "source_upload".
	SourceTicket string
	Certs        io.Reader // optional certs zip
	// Spec is the resolved build (sent as the JSON field "spec").
	Spec *BuildSpec
	// Credentials are sent sealed (file "credentials", BuildCredentials JSON).
	Credentials    *BuildCredentials
	IdempotencyKey string
	// Project names the project of a raw submit (field "project"); a
	// spec's project is Spec.BuildProject().
	Project string
	// AutoSubmit, when set, is queued with the build and sent to its store
	// once the build completes (file "auto_submit": it may carry keys).
	AutoSubmit *SubmissionRequest
}

// Submit queues a build.
func (c *Client) Submit(ctx context.Context, s SubmitRequest) (SubmitResponse, error) {
	fields := [][2]string{{"platform", s.Platform}, {"profile", s.Profile}}
	if s.Priority != nil {
		fields = append(fields, [2]string{"priority", strconv.Itoa(*s.Priority)})
	}
	if s.TimeoutSeconds > 0 {
		fields = append(fields, [2]string{"timeout_seconds", strconv.Itoa(s.TimeoutSeconds)})
	}
	if s.Project != "" {
		fields = append(fields, [2]string{"project", s.Project})
	}
	name := s.SourceName
	if name == "" {
		name = "source.tar.gz"
	}
	var files []filePart
	if s.SourceTicket != "" {
		fields = append(fields, [2]string{"source_upload", s.SourceTicket})
	} else {
		files = append(files, filePart{field: "source", name: name, r: s.Source})
	}
	if s.Certs != nil {
		files = append(files, filePart{field: "certs", name: "certs.zip", r: s.Certs})
	}
	if s.Spec != nil {
		// After the source, encoded once the source was read to its end:
		// a CLI packing the source into this body learns the tree's
		// SourceFingerprint only then (the controller reads parts in any
		// order).
		files = append(files, filePart{field: "spec", r: &lazyJSON{v: s.Spec}})
	}
	if s.Credentials != nil {
		b, err := json.Marshal(s.Credentials)
		if err != nil {
			return SubmitResponse{}, fmt.Errorf("encode the credentials: %w", err)
		}
		files = append(files, filePart{field: "credentials", name: "credentials.json", r: bytes.NewReader(b)})
	}
	if s.AutoSubmit != nil {
		b, err := json.Marshal(s.AutoSubmit)
		if err != nil {
			return SubmitResponse{}, fmt.Errorf("encode the submission: %w", err)
		}
		files = append(files, filePart{field: "auto_submit", name: "auto_submit.json", r: bytes.NewReader(b)})
	}
	var out SubmitResponse
	return out, c.multipart(ctx, "/api/builds", fields, files, header{HeaderIdempotencyKey: s.IdempotencyKey}, &out)
}

// ReusableBuild returns the newest completed build that made what spec
// would make (POST /api/builds/reuse; spec.SourceFingerprint set); a 404
// (StatusOf(err) == http.StatusNotFound) when there is none.
func (c *Client) ReusableBuild(ctx context.Context, spec *BuildSpec) (Build, error) {
	var out Build
	return out, c.call(ctx, http.MethodPost, "/api/builds/reuse", spec, &out, nil)
}

// GetBuild returns one build.
func (c *Client) GetBuild(ctx context.Context, id string) (Build, error) {
	var out Build
	return out, c.call(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(id), nil, &out, nil)
}

// ListOptions filter ListBuilds.
type ListOptions struct {
	Status, Platform, WorkerID, Cursor string
	Project                            string
	Limit                              int
	// WithSpec asks for each build's spec (include=spec); a controller
	// that predates it leaves Spec nil.
	WithSpec bool
}

// ListBuilds returns a page of builds, newest first.
func (c *Client) ListBuilds(ctx context.Context, o ListOptions) (BuildList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": o.Status, "platform": o.Platform, "worker_id": o.WorkerID, "cursor": o.Cursor, "project": o.Project} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.WithSpec {
		q.Set("include", "spec")
	}
	var out BuildList
	return out, c.call(ctx, http.MethodGet, "/api/builds?"+q.Encode(), nil, &out, nil)
}

// Cancel cancels a build.
func (c *Client) Cancel(ctx context.Context, id string) (CancelResponse, error) {
	var out CancelResponse
	return out, c.call(ctx, http.MethodPost, "/api/builds/"+url.PathEscape(id)+"/cancel", nil, &out, nil)
}

// Retry queues a new build like build id.
func (c *Client) Retry(ctx context.Context, id string) (SubmitResponse, error) {
	var out SubmitResponse
	return out, c.call(ctx, http.MethodPost, "/api/builds/"+url.PathEscape(id)+"/retry", nil, &out, nil)
}

// LogChunk is a slice of a build log.
type LogChunk struct {
	Data   []byte
	Length int64 // the whole log's length
	Status BuildStatus
}

// ReadLogs returns log bytes from offset after.
func (c *Client) ReadLogs(ctx context.Context, id string, after int64) (LogChunk, error) {
	req, err := c.NewRequest(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(id)+"/logs?after="+strconv.FormatInt(after, 10), nil, nil)
	if err != nil {
		return LogChunk{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return LogChunk{}, err
	}
	defer resp.Body.Close()
	out := LogChunk{Status: BuildStatus(resp.Header.Get(HeaderBuildStatus))}
	out.Length, _ = strconv.ParseInt(resp.Header.Get(HeaderLogLength), 10, 64)
	if out.Data, err = io.ReadAll(io.LimitReader(resp.Body, maxLogRead+1)); err != nil {
		return LogChunk{}, fmt.Errorf("read the log of build %s: %w", id, err)
	}
	if len(out.Data) > maxLogRead {
		return LogChunk{}, fmt.Errorf("read the log of build %s: the controller sent more than %d MiB at once (a controller answers 4 MiB at most; is this one?)", id, maxLogRead>>20)
	}
	return out, nil
}

// maxAnswer bounds a JSON answer of the controller: its largest, a page
// of 200 builds with specs of up to 64 KiB each, stays under 16 MiB.
const maxAnswer = 32 << 20

// DecodeAnswer decodes a JSON answer of the controller into out, reading
// at most maxAnswer bytes of it: a body that goes on past that is refused,
// not held in memory.
func DecodeAnswer(body io.Reader, out any) error {
	lr := &io.LimitedReader{R: body, N: maxAnswer + 1}
	err := json.NewDecoder(lr).Decode(out)
	if lr.N <= 0 {
		return fmt.Errorf("the answer is larger than %d MiB, more than a controller sends", maxAnswer>>20)
	}
	return err
}

// maxLogRead bounds one answer of ReadLogs: a controller sends at most
// 4 MiB (httpapi.Limits.LogRead), so anything past this is not one.
const maxLogRead = 16 << 20

// DownloadArtifact opens an artifact from byte offset (0 for all). The
// caller closes the body; a 206 answer carries Content-Range.
func (c *Client) DownloadArtifact(ctx context.Context, id, name string, offset int64) (*http.Response, error) {
	h := header{}
	if offset > 0 {
		h["Range"] = fmt.Sprintf("bytes=%d-", offset)
	}
	req, err := c.NewRequest(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(id)+"/artifacts/"+url.PathEscape(name), nil, h)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Limits returns what the controller accepts (developer and admin keys).
func (c *Client) Limits(ctx context.Context) (Limits, error) {
	var out Limits
	return out, c.call(ctx, http.MethodGet, "/api/limits", nil, &out, nil)
}

// FarmOffers returns what the online workers offer builds; with a
// project, only the workers of the pools it may use (developer and admin
// keys).
func (c *Client) FarmOffers(ctx context.Context, project string) (FarmOffers, error) {
	var out FarmOffers
	path := "/api/farm/offers"
	if project != "" {
		path += "?project=" + url.QueryEscape(project)
	}
	return out, c.call(ctx, http.MethodGet, path, nil, &out, nil)
}

// ListWorkers returns the registered workers (admin keys).
func (c *Client) ListWorkers(ctx context.Context) (WorkerList, error) {
	var out WorkerList
	return out, c.call(ctx, http.MethodGet, "/api/workers", nil, &out, nil)
}

// PauseWorker stops giving builds to worker id; the builds it runs go on
// (admin keys).
func (c *Client) PauseWorker(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/api/workers/"+url.PathEscape(id)+"/pause", nil, nil, nil)
}

// ResumeWorker gives a paused worker builds again (admin keys).
func (c *Client) ResumeWorker(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/api/workers/"+url.PathEscape(id)+"/resume", nil, nil, nil)
}

// AcknowledgeWorker clears worker id's needs-attention state (admin keys).
func (c *Client) AcknowledgeWorker(ctx context.Context, id string) (Worker, error) {
	var out Worker
	return out, c.call(ctx, http.MethodPost, "/api/workers/"+url.PathEscape(id)+"/acknowledge", nil, &out, nil)
}

// Events lists sealed audit events with a sequence above since (admin).
func (c *Client) Events(ctx context.Context, since int64, limit int) (EventList, error) {
	var out EventList
	q := url.Values{"since": {strconv.FormatInt(since, 10)}, "limit": {strconv.Itoa(limit)}}
	return out, c.call(ctx, http.MethodGet, "/api/events?"+q.Encode(), nil, &out, nil)
}

// VerifyEvents checks the audit log's hash chain (admin).
func (c *Client) VerifyEvents(ctx context.Context) (EventVerification, error) {
	var out EventVerification
	return out, c.call(ctx, http.MethodGet, "/api/events/verify", nil, &out, nil)
}

// Controllers lists the registered controller replicas (admin).
func (c *Client) Controllers(ctx context.Context) (ControllerList, error) {
	var out ControllerList
	return out, c.call(ctx, http.MethodGet, "/api/controllers", nil, &out, nil)
}

// VMAuth exchanges a build's OTP for a VM token.
func (c *Client) VMAuth(ctx context.Context, buildID, otp string) (VMAuthResponse, error) {
	var out VMAuthResponse
	return out, c.call(ctx, http.MethodPost, "/api/vm/auth", nil, &out, header{HeaderOTP: otp, HeaderBuildID: buildID})
}

// Source opens a build's source archive with a VM token (or, with an empty
// vmToken and a worker token, as the assigned worker).
func (c *Client) Source(ctx context.Context, buildID, vmToken, workerToken string) (*http.Response, error) {
	req, err := c.NewRequest(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(buildID)+"/source", nil,
		header{HeaderVMToken: vmToken, HeaderWorkerToken: workerToken})
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// StartArtifactUpload asks where to upload an artifact directly (VM only).
func (c *Client) StartArtifactUpload(ctx context.Context, buildID, vmToken string, req DirectUploadRequest) (DirectUpload, error) {
	var out DirectUpload
	return out, c.call(ctx, http.MethodPost, "/api/builds/"+url.PathEscape(buildID)+"/artifacts/direct", req, &out, header{HeaderVMToken: vmToken})
}

// CompleteArtifactUpload records a direct upload once the file is PUT
// (VM only).
func (c *Client) CompleteArtifactUpload(ctx context.Context, buildID, vmToken, ticket string) (Artifact, error) {
	var out Artifact
	return out, c.call(ctx, http.MethodPost, "/api/builds/"+url.PathEscape(buildID)+"/artifacts/direct/complete", DirectUploadComplete{Ticket: ticket}, &out, header{HeaderVMToken: vmToken})
}

// CertsSecure fetches a build's signing material with a VM token.
func (c *Client) CertsSecure(ctx context.Context, buildID, vmToken string) (CertsResponse, error) {
	var out CertsResponse
	return out, c.call(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(buildID)+"/certs-secure", nil, &out, header{HeaderVMToken: vmToken})
}

// BuildJob fetches the build's spec and its project's variables for the
// spec's environment, values included (VM only).
func (c *Client) BuildJob(ctx context.Context, buildID, vmToken string) (BuildJob, error) {
	var out BuildJob
	return out, c.call(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(buildID)+"/spec", nil, &out, header{HeaderVMToken: vmToken})
}

// BuildCredentials fetches the build's sealed credentials (VM only); a
// build without any answers 404.
func (c *Client) BuildCredentials(ctx context.Context, buildID, vmToken string) (BuildCredentials, error) {
	var out BuildCredentials
	return out, c.call(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(buildID)+"/credentials", nil, &out, header{HeaderVMToken: vmToken})
}

// AppendLog appends data at offset; it returns the log's new length. On a
// 416 the *Error carries the length to resend from.
func (c *Client) AppendLog(ctx context.Context, buildID, vmToken string, offset int64, data []byte) (int64, error) {
	req, err := c.NewRequest(ctx, http.MethodPost, "/api/builds/"+url.PathEscape(buildID)+"/logs?offset="+strconv.FormatInt(offset, 10),
		bytes.NewReader(data), header{HeaderVMToken: vmToken, "Content-Type": "application/octet-stream"})
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out LogAppendResponse
	if err := DecodeAnswer(resp.Body, &out); err != nil {
		return 0, fmt.Errorf("decode log append answer: %w", err)
	}
	return out.Length, nil
}

// PutArtifact streams an artifact from the VM as the raw body of
// PUT /api/builds/{id}/artifacts/{name}, size bytes of r (-1: unknown,
// sent chunked). A controller that predates it answers 404 or 405: send
// it with UploadArtifact then.
func (c *Client) PutArtifact(ctx context.Context, buildID, vmToken, name string, r io.Reader, size int64, sha256hex string) (Artifact, error) {
	var out Artifact
	req, err := c.NewRequest(ctx, http.MethodPut, "/api/builds/"+url.PathEscape(buildID)+"/artifacts/"+url.PathEscape(name), r,
		header{HeaderVMToken: vmToken, HeaderChecksum: sha256hex, "Content-Type": "application/octet-stream"})
	if err != nil {
		return out, err
	}
	if size >= 0 {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := DecodeAnswer(resp.Body, &out); err != nil {
		return out, fmt.Errorf("decode the artifact upload's answer: %w", err)
	}
	return out, nil
}

// UploadArtifact streams an artifact from the VM.
func (c *Client) UploadArtifact(ctx context.Context, buildID, vmToken, name string, r io.Reader, sha256hex string) (Artifact, error) {
	var out Artifact
	return out, c.multipart(ctx, "/api/builds/"+url.PathEscape(buildID)+"/artifacts", nil,
		[]filePart{{field: "artifact", name: name, r: r}}, header{HeaderVMToken: vmToken, HeaderChecksum: sha256hex}, &out)
}

// CreateWebhook adds a webhook endpoint (admin); the answer holds its secret, shown once.
func (c *Client) CreateWebhook(ctx context.Context, req WebhookRequest) (Webhook, error) {
	var out Webhook
	err := c.call(ctx, http.MethodPost, "/api/webhooks", req, &out, nil)
	return out, err
}

// ListWebhooks lists the webhook endpoints (admin).
func (c *Client) ListWebhooks(ctx context.Context) (WebhookList, error) {
	var out WebhookList
	err := c.call(ctx, http.MethodGet, "/api/webhooks", nil, &out, nil)
	return out, err
}

// DeleteWebhook removes an endpoint and its delivery log (admin).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/webhooks/"+url.PathEscape(id), nil, nil, nil)
}

// WebhookDeliveries lists an endpoint's deliveries with their attempt logs, newest first (admin).
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) (WebhookDeliveryList, error) {
	var out WebhookDeliveryList
	path := "/api/webhooks/" + url.PathEscape(id) + "/deliveries"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	err := c.call(ctx, http.MethodGet, path, nil, &out, nil)
	return out, err
}

// RedeliverWebhook sends a delivery again, with a fresh round of attempts (admin).
func (c *Client) RedeliverWebhook(ctx context.Context, id, deliveryID string) (WebhookDelivery, error) {
	var out WebhookDelivery
	err := c.call(ctx, http.MethodPost, "/api/webhooks/"+url.PathEscape(id)+"/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, &out, nil)
	return out, err
}

// PingWebhook queues a test delivery of event type "ping" to one endpoint
// only; it shows in that endpoint's delivery log (admin).
func (c *Client) PingWebhook(ctx context.Context, id string) (WebhookDelivery, error) {
	var out WebhookDelivery
	err := c.call(ctx, http.MethodPost, "/api/webhooks/"+url.PathEscape(id)+"/ping", nil, &out, nil)
	return out, err
}
