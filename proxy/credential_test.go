package proxy

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/session"
)

// TestTheBearerSchemeIsReadInAnyCase: the scheme of an Authorization is
// case-insensitive, so "bearer K" is the client "Bearer K" is: the same
// key label for a profile's match.key, and the same tenant for its
// sessions. The label was taken with the scheme left on, and no profile
// matched.
func TestTheBearerSchemeIsReadInAnyCase(t *testing.T) {
	const key = "team-0123456789abcdef"
	pol := "profiles:\n  - match: {key: \"team-*\"}\n    deny: [repo_list_issues]\n"
	msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}
	for _, tc := range []struct{ name, auth string }{
		{"the scheme as the RFC spells it", "Bearer " + key},
		{"the scheme in lower case", "bearer " + key},
		{"the scheme in upper case", "BEARER " + key},
		{"the scheme followed by two spaces", "Bearer  " + key},
	} {
		t.Run(tc.name+" gets the profile of the key and its tenant", func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			var gw *Gateway
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, pol)), func(g *Gateway) { gw = g })
			hdr := map[string]string{"Authorization": tc.auth, "X-Session-ID": "cred"}
			if x := send(t, base, chatRequest(t, msgs, testCatalog(3), false, nil), hdr); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			up.mu.Lock()
			sent := toolNames(up.body)
			up.mu.Unlock()
			if slices.Contains(sent, "repo_list_issues") {
				t.Errorf("the upstream got %v: the profile of key %q did not apply", sent, "team-*")
			}
			if x := send(t, base, chatRequest(t, msgs, testCatalog(40), false, nil), hdr); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			if _, err := gw.Sessions.Get(context.Background(), session.Key(session.Tenant("Bearer "+key), "cred", "", "", "")); err != nil {
				t.Errorf("no session under the tenant of %q: %v", "Bearer "+key, err)
			}
		})
	}
}
