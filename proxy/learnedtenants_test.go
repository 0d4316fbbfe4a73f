package proxy

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/session"
)

// nextStepUpstream answers a request whose conversation ends with a
// tool's result with a call of fs_read_file (the agent's next step, which
// teaches the tenant's transitions), and any other with text; it keeps
// the tools each request was offered.
type nextStepUpstream struct {
	mu   sync.Mutex
	seen [][]string
}

func (u *nextStepUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, toolNames(body))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if gjson.GetBytes(body, "messages.@reverse.0.role").String() == "tool" {
		_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"fs_read_file","arguments":"{\"path\":\"a\"}"}}]},"finish_reason":"tool_calls"}]}`)
		return
	}
	_, _ = io.WriteString(w, plainAnswer)
}

func (u *nextStepUpstream) last() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[len(u.seen)-1]
}

// TestATenantKeepsWhatItTaughtAgainstNewCredentials: every turn the
// upstream accepted created or refreshed its tenant's records of learned
// habits (256 tenants) and transitions (NewLearned's bound), whether it
// taught anything or not, so turns under that many made-up credentials
// (any string is one with gateway.upstream_key) flushed every tenant's
// habits. A tenant now gets a record only from a turn that teaches it,
// and one that taught in two turns is kept apart from tenants that
// taught once.
func TestATenantKeepsWhatItTaughtAgainstNewCredentials(t *testing.T) {
	const (
		taught = "Let the landlord know the heating is broken again."
		later  = "Tell the landlord the heating broke once more."
		tool   = "mail_send"
	)
	for _, tc := range []struct {
		name        string
		tenants     int  // NewLearned's bound: cmd/gateway's is 4,096, and 256 of them for habits
		others      int  // other credentials, one turn each
		othersTeach bool // each other credential's turn teaches: it calls a tool, and the model calls another
	}{
		{"B keeps its habit after 256 other credentials' turns that teach nothing", 4096, 256, false},
		{"B keeps its habit and transitions after four times the bound of other credentials' turns that teach nothing", 8, 32, false},
		{"B keeps its habit and transitions after four times the bound of other credentials that each teach once", 8, 32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := testCatalog(40)
			up := &nextStepUpstream{}
			learned := NewLearned(tc.tenants)
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway: {mode: hybrid, preselect: 3, follow_up: 0, upstream_key: sk-operator}\n")),
				func(g *Gateway) { g.Learned = learned })
			send := func(key, sess string, msgs []map[string]any) []string {
				t.Helper()
				resp := post(t, base, chatRequest(t, msgs, tools, false, nil), map[string]string{"Authorization": "Bearer " + key, "X-Session-ID": sess})
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				return up.last()
			}
			step := append([]map[string]any{{"role": "user", "content": taught}}, toolStep("c1", tool, `{"id":"x"}`, "sent")...)
			for i := range 2 { // B's two conversations teach its habit and a transition
				send("sk-tenant-b", fmt.Sprintf("b-%d", i), step[:1])
				send("sk-tenant-b", fmt.Sprintf("b-%d", i), step)
			}
			if got := send("sk-tenant-b", "probe-0", []map[string]any{{"role": "user", "content": later}}); !slices.Contains(got, tool) {
				t.Fatalf("B did not learn its habit: offered %v", got)
			}
			for i := range tc.others {
				msgs := []map[string]any{{"role": "user", "content": "hi"}}
				if tc.othersTeach {
					msgs = step
				}
				send(fmt.Sprintf("sk-other-%04d-xxxxxxxx", i), "x", msgs)
			}
			if trans, habits := learned.Peek(session.Tenant(fmt.Sprintf("Bearer sk-other-%04d-xxxxxxxx", tc.others-1))); tc.othersTeach && (trans == nil || habits == nil) {
				t.Fatalf("the last other credential's turn taught nothing (transitions %v, habits %v): the test needs turns that teach", trans != nil, habits != nil)
			}
			if trans, _ := learned.Peek(session.Tenant("Bearer sk-tenant-b")); trans == nil {
				t.Errorf("after %d other credentials' turns B's learned transitions are gone", tc.others)
			}
			if got := send("sk-tenant-b", "probe-1", []map[string]any{{"role": "user", "content": later}}); !slices.Contains(got, tool) {
				t.Errorf("after %d other credentials' turns B's habit is gone: offered %v", tc.others, got)
			}
		})
	}
}
