package httpapi

import (
	"net/http"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// reusableBuild answers POST /api/builds/reuse (`expo-build build
// --reuse`): the body is the spec a submit would send, with its
// source_fingerprint; the answer is the newest completed build that made
// the same thing (store.ReusableBuild) with its artifacts and install
// link, or 404 when there is none and the CLI builds. The key must be
// allowed the spec's project, as for a submit.
func (s *Server) reusableBuild(w http.ResponseWriter, r *http.Request, key store.APIKey) {
	var spec api.BuildSpec
	if err := s.decodeJSON(w, r, &spec); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := store.ValidatePlatform(spec.Platform); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkSpec(&spec, spec.Platform); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := projectAllowed(key, spec.BuildProject()); err != nil {
		s.fail(w, r, err)
		return
	}
	build, err := s.store.ReusableBuild(r.Context(), spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addInstallLink(r, &build)
	writeJSON(w, http.StatusOK, build)
}
