package policy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/session"
)

// TestSessionsStoreIsCheckedAsServeParsesIt holds validate (Load) to the
// parser serve uses: a URL one refuses the other refuses too, at the
// file:line of sessions.store, with a reason and never the password.
func TestSessionsStoreIsCheckedAsServeParsesIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  string
		reason string // "" when the URL is good
	}{
		{"memory is accepted", "memory", ""},
		{"a plain redis URL is accepted", "redis://127.0.0.1:6379/0", ""},
		{"a rediss URL with a password and options is accepted", "rediss://:hunter2@cache.internal:6380/2?read_timeout=1s&pool_size=20", ""},
		{"a database that is not a number is refused", "redis://:hunter2@127.0.0.1:16401/abc", `invalid database number: "abc"`},
		{"an unknown option is refused", "redis://:hunter2@127.0.0.1:16401/0?bogus=1", "unexpected option: bogus"},
		{"a dial_timeout that is not a duration is refused", "redis://:hunter2@127.0.0.1:16401?dial_timeout=x", "dial_timeout"},
		{"a pool_size that is not a number is refused", "redis://:hunter2@127.0.0.1:16401?pool_size=x", "pool_size"},
		{"a port that is not a number is refused with the reason", "redis://127.0.0.1:abc/0", "invalid port"},
		{"a port out of range is refused", "redis://127.0.0.1:99999/0", "not between 1 and 65535"},
		{"a URL without a host is refused", "redis:///0", "no host"},
		{"another scheme is refused", "http://127.0.0.1:6379", `scheme "http"`},
		{"a unix socket URL is refused", "unix:///tmp/redis.sock", `scheme "unix"`},
		{"a password cut up by an unescaped slash is not quoted back", "redis://:hun/ter2@127.0.0.1:6379", "percent-encoded"},
		{"a word that is not a URL is refused", "memroy", "want memory or a redis://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadString(t, "sessions:\n  store: "+strconv.Quote(tc.store)+"\n", nil)
			_, serveErr := session.NewRedis(tc.store, time.Minute, nil)
			if tc.store != "memory" && tc.store != "memroy" && (err == nil) != (serveErr == nil) {
				t.Errorf("validate says %v, serve says %v", err, serveErr)
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			got := problemsOf(t, err)
			if len(got) != 1 || !strings.HasPrefix(got[0], "2:10: sessions.store: ") || !strings.Contains(got[0], tc.reason) {
				t.Errorf("problems %q, want one at 2:10 with %q", got, tc.reason)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hun/") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
