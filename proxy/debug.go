package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/toolgate/toolgate/session"
)

// AdminTokenHeader carries Gateway.AdminToken on debug requests. It is not
// Authorization, because a debug request may carry a tenant's own
// Authorization to name that tenant's session (see serveDebugSession).
const AdminTokenHeader = "X-Toolgate-Admin-Token"

// debugSessionsPrefix is the debug route; it exists only when
// Gateway.AdminToken is set.
const debugSessionsPrefix = "/debug/sessions/"

// debugPprofPrefix serves the runtime profiles; like the sessions route it
// exists only when Gateway.AdminToken is set.
const debugPprofPrefix = "/debug/pprof/"

// sessionView is what GET /debug/sessions/{id} answers.
type sessionView struct {
	Key   string        `json:"key"`
	State session.State `json:"state"`
}

// adminOK reports whether r carries the admin token, answering 401 when it
// does not. Hashing first makes the comparison constant-time in the length
// too.
func (g *Gateway) adminOK(w http.ResponseWriter, r *http.Request) bool {
	got, want := sha256.Sum256([]byte(r.Header.Get(AdminTokenHeader))), sha256.Sum256([]byte(g.AdminToken))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		// Info, not Warn: anyone who can reach the port can send these,
		// but an operator looking for a probe of the debug routes finds it.
		g.logger().InfoContext(r.Context(), "admin token refused", "path", r.URL.Path, "remote", r.RemoteAddr, "token_sent", r.Header.Get(AdminTokenHeader) != "")
		writeJSONError(w, http.StatusUnauthorized, apiError{Message: "debug endpoints need a valid " + AdminTokenHeader, Type: "invalid_request_error", Code: "unauthorized"})
		return false
	}
	return true
}

// servePprof serves the runtime profiles of net/http/pprof under
// /debug/pprof/ to admin requests, so the hot path can be profiled in
// production. (Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux; the gateway never serves that mux.)
func (g *Gateway) servePprof(w http.ResponseWriter, r *http.Request) {
	if !g.adminOK(w, r) {
		return
	}
	switch name := strings.TrimPrefix(r.URL.Path, debugPprofPrefix); name {
	case "":
		pprof.Index(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Handler(name).ServeHTTP(w, r)
	}
}

// serveDebugSession answers GET /debug/sessions/{id} with a session's state.
// The request needs the admin token in X-Toolgate-Admin-Token (compared in
// constant time); without or with a wrong one it gets 401.
//
// Sessions are namespaced by tenant, so {id} is read two ways:
//   - a store key of any kind, as the decision log prints it
//     ("<tenant>:id:<X-Session-ID>", "<tenant>:ih:<hash>" for an id longer
//     than session.MaxReadableID, "<tenant>:fp:<hash>" for a conversation's
//     opening, "<tenant>:fc:<hash>" for one with a prompt_cache_key; see
//     session.IsKey): looked up as is, no credential needed;
//   - otherwise an X-Session-ID, namespaced by the tenant of the debug
//     request's own Authorization (or Api-Key, or X-Api-Key) header, exactly as a chat
//     request from that client with that X-Session-ID would be.
//
// It answers 404 when no such session is held, 503 when the store is
// unavailable (down, slow, refusing the credentials) and 500 saying so
// when the stored value is unreadable.
func (g *Gateway) serveDebugSession(w http.ResponseWriter, r *http.Request) {
	if !g.adminOK(w, r) {
		return
	}
	id := strings.TrimPrefix(r.URL.Path, debugSessionsPrefix)
	if id == "" {
		writeJSONError(w, http.StatusNotFound, apiError{Message: "no session id in the path", Type: "invalid_request_error", Code: "not_found"})
		return
	}
	key := id
	if !session.IsKey(id) {
		key = session.Key(session.Tenant(credential(r)), id, "", "", "")
	}
	st, err := g.Sessions.Get(r.Context(), key)
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, apiError{Message: "no session " + key, Type: "invalid_request_error", Code: "not_found"})
		return
	case errors.Is(err, session.ErrUnavailable):
		// The store logs when it becomes unavailable. Its errors say
		// "session store unavailable" and the cause, never the URL or
		// the password.
		writeJSONError(w, http.StatusServiceUnavailable, apiError{Message: err.Error(), Type: "gateway_error", Code: "session_store_unavailable"})
		return
	case errors.Is(err, session.ErrCorrupt):
		g.logger().WarnContext(r.Context(), "debug session: the stored value is unreadable", "session", key, "err", err)
		writeJSONError(w, http.StatusInternalServerError, apiError{Message: err.Error(), Type: "gateway_error", Code: "session_unreadable"})
		return
	case err != nil:
		g.writeError(w, r, err)
		return
	}
	body, err := json.MarshalIndent(sessionView{Key: key, State: st}, "", "  ")
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(body, '\n'))
}
