package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// TestDebugSessionsSaysWhatIsWrongWithTheStore: the debug route answered a
// bare 500 "internal gateway error" when the store was down, refused the
// password, or held an unreadable value.
func TestDebugSessionsSaysWhatIsWrongWithTheStore(t *testing.T) {
	redisStore := func(t *testing.T, url string) session.Store {
		s, err := session.NewRedis(url, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	for _, tc := range []struct {
		name       string
		store      func(t *testing.T) session.Store
		wantStatus int
		want       []string // in the body
	}{
		{"a store that is down is 503, session store unavailable, with the cause", func(t *testing.T) session.Store {
			srv := miniredis.RunT(t)
			addr := srv.Addr()
			srv.Close()
			return redisStore(t, "redis://"+addr)
		}, http.StatusServiceUnavailable, []string{`"code":"session_store_unavailable"`, "session store unavailable", "connection refused"}},
		{"a store that refuses the password is 503, without the password", func(t *testing.T) session.Store {
			srv := miniredis.RunT(t)
			srv.RequireAuth("right-s3cret")
			return redisStore(t, "redis://:wrong-s3cret@"+srv.Addr())
		}, http.StatusServiceUnavailable, []string{`"code":"session_store_unavailable"`, "WRONGPASS"}},
		{"a store the breaker stopped asking is 503 at once", func(t *testing.T) session.Store {
			return failingStore{fmt.Errorf("reading session from redis: %w: not asked after 3 failures in a row", session.ErrUnavailable)}
		}, http.StatusServiceUnavailable, []string{`"code":"session_store_unavailable"`, "not asked"}},
		{"an unreadable value is 500 saying so, naming the key", func(t *testing.T) session.Store {
			srv := miniredis.RunT(t)
			if err := srv.Set("toolgate:session:"+session.Key(session.Tenant("Bearer sk-tenant-a"), "dbg-1", "", "", ""), "{not json"); err != nil {
				t.Fatal(err)
			}
			return redisStore(t, "redis://"+srv.Addr())
		}, http.StatusInternalServerError, []string{`"code":"session_unreadable"`, "stored session value is unreadable", ":id:dbg-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.store(t)
			base := newTestGateway(t, &fakellm.Model{}, func(g *Gateway) {
				g.AdminToken = "admin-s3cret"
				g.Sessions = store
			})
			start := time.Now()
			status, body := getWithHeaders(t, strings.TrimSuffix(base, "/v1")+"/debug/sessions/dbg-1",
				map[string]string{AdminTokenHeader: "admin-s3cret", "Authorization": "Bearer sk-tenant-a"})
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body %s, want %q in it", body, w)
				}
			}
			if strings.Contains(body, "s3cret") {
				t.Errorf("the body repeats a secret: %s", body)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
