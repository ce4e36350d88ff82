package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

func (s *Server) vmAuth(w http.ResponseWriter, r *http.Request) {
	otp, id := r.Header.Get(api.HeaderOTP), r.Header.Get(api.HeaderBuildID)
	if otp == "" || id == "" {
		s.fail(w, r, fmt.Errorf("%w: send the one-time password in %s and the build id in %s", store.ErrUnauthorized, api.HeaderOTP, api.HeaderBuildID))
		return
	}
	if !store.ValidID(id) {
		s.fail(w, r, fmt.Errorf("%w: the one-time password is unknown, used, expired or for another build", store.ErrUnauthorized))
		return
	}
	resp, err := s.store.VMAuth(r.Context(), id, otp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) downloadSource(w http.ResponseWriter, r *http.Request, buildID string) {
	files, err := s.store.Files(r.Context(), buildID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	contentType := map[string]string{"tar.gz": "application/gzip", "zip": "application/zip"}[files.SourceFormat]
	s.serveFile(w, r, buildID, blobs.Source, "source."+files.SourceFormat, contentType, files.SourceSHA256)
}

func (s *Server) certsSecure(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	files, err := s.store.Files(r.Context(), buildID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !files.HasCerts || files.CertsDeleted {
		s.fail(w, r, fmt.Errorf("%w: build %s has no signing certificates", store.ErrNotFound, buildID))
		return
	}
	raw, err := s.blobs.Unseal(r.Context(), buildID, blobs.Certs)
	if errors.Is(err, os.ErrNotExist) {
		s.fail(w, r, fmt.Errorf("%w: build %s has no signing certificates", store.ErrNotFound, buildID))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	certs, err := parseCerts(raw)
	if err != nil {
		s.fail(w, r, fmt.Errorf("stored certificates: %w", err))
		return
	}
	// A fresh password for the temporary keychain the VM creates.
	pw := make([]byte, 24)
	rand.Read(pw) //nolint:errcheck // crypto/rand does not fail on supported platforms
	certs.KeychainPassword = base64.RawURLEncoding.EncodeToString(pw)
	body, err := json.Marshal(certs)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode the certificates: %w", err))
		return
	}
	s.sendOnce(w, r, buildID, attemptID, store.SecretCerts, body)
}

// sendOnce answers with one of the attempt's sealed files, at most once per
// attempt (later fetches get 410 Gone). The fetch counts once the whole
// body was handed to the connection: a write that fails undoes it, so the
// VM's retry after a broken connection gets the file; a VM that loses a
// body the controller wrote out whole fails its attempt, and the next
// attempt fetches again.
func (s *Server) sendOnce(w http.ResponseWriter, r *http.Request, buildID, attemptID, what string, body []byte) {
	if err := s.store.TakeSecret(r.Context(), buildID, attemptID, what); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if rerr := s.store.ReturnSecret(ctx, buildID, attemptID, what); rerr != nil {
			s.log.WithError(rerr).WithField("build_id", buildID).Warn("the VM's fetch broke off, and undoing its record failed: the attempt cannot fetch again")
		}
	}
}

// buildJob answers the VM with its build's spec and the variables its
// attempt was claimed with (store.AttemptEnvironment), values included
// (secret ones too: the VM is the one place they are for). Sensitive and
// secret values go only to a worker its pool trusts now, and a job
// carrying them leaves once per attempt, like the credentials.
func (s *Server) buildJob(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	env, err := s.store.AttemptEnvironment(r.Context(), buildID, attemptID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	vars, err := s.openVariables(env.Variables, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	job := api.BuildJob{Spec: env.Spec, Variables: vars}
	if !slices.ContainsFunc(job.Variables, func(v api.Variable) bool { return v.Visibility != api.VisibilityPlaintext }) {
		writeJSON(w, http.StatusOK, job) // nothing secret in it: no once-only rule, and a hand-back stays free
		return
	}
	if !env.Trusted {
		s.fail(w, r, fmt.Errorf("%w: build %s has sensitive or secret variables, and its worker's pool is not trusted with them any more; an admin trusts the pool again (pools set --trusted), or the build is cancelled and retried", store.ErrForbidden, buildID))
		return
	}
	body, err := json.Marshal(job)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode the build job: %w", err))
		return
	}
	s.sendOnce(w, r, buildID, attemptID, store.SecretSecrets, body)
}

// buildCredentials answers the VM with its build's sealed credentials, once
// per attempt.
func (s *Server) buildCredentials(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	files, err := s.store.Files(r.Context(), buildID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	none := fmt.Errorf("%w: build %s has no credentials", store.ErrNotFound, buildID)
	if !files.HasCredentials || files.CertsDeleted {
		s.fail(w, r, none)
		return
	}
	raw, err := s.blobs.Unseal(r.Context(), buildID, blobs.Credentials)
	if errors.Is(err, os.ErrNotExist) {
		s.fail(w, r, none)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.sendOnce(w, r, buildID, attemptID, store.SecretCredentials, raw)
}

func (s *Server) appendLog(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		s.fail(w, r, fmt.Errorf("%w: parameter \"offset\" must be the byte offset (≥ 0) this chunk starts at", store.ErrInvalid))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.LogChunk))
	if err != nil {
		s.fail(w, r, multipartErr(err))
		return
	}
	length, err := s.store.AppendLog(r.Context(), buildID, attemptID, offset, data, s.limits.LogTotal)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LogAppendResponse{Length: length})
}

func (s *Server) uploadArtifact(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	form, err := newForm(w, r, s.limits.Artifact+s.limits.JSONBody, `an "artifact" file`)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for {
		part, err := form.next()
		if err == io.EOF {
			s.fail(w, r, fmt.Errorf("%w: file \"artifact\" is required", store.ErrInvalid))
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if part.FormName() != "artifact" || !isFile(part) {
			continue
		}
		// The file name is the artifact's name: a path is reduced to its
		// last element; an empty or dot name cannot be stored.
		name := blobs.CleanName(part.FileName())
		if name == "" {
			s.fail(w, r, badRequest("the artifact's file name %q is not a usable file name; send a plain name such as app-release.apk", part.FileName()))
			return
		}
		p, err := s.blobs.Create(r.Context(), buildID, blobs.Artifact(attemptID, name))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer p.Abort()
		if err := p.Fill(part, s.limits.Artifact); err != nil {
			s.fail(w, r, multipartErr(err))
			return
		}
		s.recordArtifact(w, r, buildID, attemptID, name, p, r.Header.Get(api.HeaderChecksum))
		return
	}
}

// writeEvent writes one log line as an event. A bare CR ends a line in
// event-stream framing, so a CR inside the line (a progress bar's redraw)
// starts another data field of the same event, which the client joins with
// "\n"; written raw, it would let build output forge fields (event: end).
func writeEvent(w io.Writer, id int64, line []byte) {
	fmt.Fprintf(w, "id: %d\n", id)
	for _, part := range bytes.Split(line, []byte{'\r'}) {
		fmt.Fprintf(w, "data: %s\n", part)
	}
	io.WriteString(w, "\n")
}

// readLogs returns log bytes from ?after=N as text/plain, or with Accept:
// text/event-stream follows the log live: one "data:" event per line (the
// event id is the byte offset after it, for Last-Event-ID resumption) and a
// final "end" event carrying the build's status.
func (s *Server) readLogs(w http.ResponseWriter, r *http.Request, b buildAccess) {
	after := int64(0)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, fmt.Errorf("%w: parameter \"after\" must be a byte offset ≥ 0", store.ErrInvalid))
			return
		}
		after = n
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if v := r.Header.Get("Last-Event-ID"); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				after = n
			}
		}
		s.FollowLogs(w, r, b.ID, after)
		return
	}
	slice, err := s.store.ReadLog(r.Context(), b.ID, after, s.limits.LogRead)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(api.HeaderLogLength, strconv.FormatInt(slice.Length, 10))
	w.Header().Set(api.HeaderBuildStatus, string(slice.Status))
	w.Write(slice.Data) //nolint:errcheck
}

// FollowLogs streams build buildID's log from byte offset after as
// server-sent events, ending when the build ends or the server drains. The
// caller has checked access (the API's log endpoint, the dashboard).
func (s *Server) FollowLogs(w http.ResponseWriter, r *http.Request, buildID string, after int64) {
	ctx := r.Context()
	watch := s.hub.WatchBuild(buildID)
	defer watch.Close()
	first, err := s.store.ReadLog(ctx, buildID, after, s.limits.LogRead)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	var partial []byte // bytes of a line not yet ended
	slice := first
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		after += int64(len(slice.Data))
		data := append(partial, slice.Data...)
		partial = nil
		lineEnd := after - int64(len(data))
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				partial = append([]byte(nil), data...)
				break
			}
			lineEnd += int64(i + 1)
			writeEvent(bw, lineEnd, bytes.TrimRight(data[:i], "\r"))
			data = data[i+1:]
		}
		if after >= slice.Length && slice.Status.Terminal() {
			if len(partial) > 0 {
				writeEvent(bw, after, partial)
			}
			fmt.Fprintf(bw, "event: end\ndata: %s\n\n", slice.Status)
			bw.Flush()
			rc.Flush() //nolint:errcheck
			return
		}
		if err := bw.Flush(); err != nil {
			return
		}
		rc.Flush() //nolint:errcheck
		if after >= slice.Length {
			select {
			case <-ctx.Done():
				return
			case <-s.draining:
				return
			case <-watch.C:
			case <-keepalive.C:
				fmt.Fprint(bw, ": keepalive\n\n")
			}
		}
		if slice, err = s.store.ReadLog(ctx, buildID, after, s.limits.LogRead); err != nil {
			return
		}
	}
}
