package server

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// authorized reports whether r may be served: always without an API key,
// else when it is to one of the public paths or carries the key, as
// "Authorization: Bearer <key>" or "x-api-key: <key>".
func (s *Server) authorized(r *http.Request) bool {
	key := s.opt.APIKey
	if key == "" || slices.Contains(s.opt.PublicPaths, r.URL.Path) {
		return true
	}
	given := r.Header.Get("X-Api-Key")
	if auth := r.Header.Get("Authorization"); given == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		given = strings.TrimSpace(auth[7:])
	}
	return subtle.ConstantTimeCompare([]byte(given), []byte(key)) == 1
}

// authorize adds the server's API key to a request to a peer worker.
func (s *Server) authorize(req *http.Request) {
	if s.opt.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.opt.APIKey)
	}
}

// unauthorized answers a request without a valid API key, in the error
// format of the API it was for.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
	e := &apiError{Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
		Message: "A valid API key is required: send it as \"Authorization: Bearer <key>\" or \"x-api-key: <key>\"."}
	if isAnthropicPath(r.URL.Path) {
		writeAnthropicError(w, e)
		return
	}
	writeError(w, e)
}
