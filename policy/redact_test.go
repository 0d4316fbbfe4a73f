package policy

import (
	"strings"
	"testing"
)

func TestRedactURLHidesEveryCredentialAURLCanCarry(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"a URL without credentials is printed as written", "https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"a password is hidden with its user name", "https://user:SECRET@llm.internal/v1", "https://xxxxx@llm.internal/v1"},
		{"a token given as the user name is hidden", "https://sk-live-SECRET@llm.internal/v1", "https://xxxxx@llm.internal/v1"},
		{"an empty user name is still marked as there", "https://@llm.internal/v1", "https://xxxxx@llm.internal/v1"},
		{"a query value is hidden and its key kept", "https://llm.internal/v1?api-key=SECRET", "https://llm.internal/v1?api-key=xxxxx"},
		{"every query value is hidden, in order", "https://h/v1?b=SECRET&api-version=2024&a=SECRET", "https://h/v1?b=xxxxx&api-version=xxxxx&a=xxxxx"},
		{"a query part without a key is hidden whole", "https://h/v1?SECRET", "https://h/v1?xxxxx"},
		{"an empty query value is marked all the same", "https://h/v1?key=", "https://h/v1?key=xxxxx"},
		{"a query that does not decode is hidden too", "https://h/v1?key=SECRET%zz", "https://h/v1?key=xxxxx"},
		{"a fragment is hidden", "https://h/v1#SECRET", "https://h/v1#xxxxx"},
		{"userinfo and query together are hidden", "http://u:SECRET@h:8080/v1?k=SECRET", "http://xxxxx@h:8080/v1?k=xxxxx"},
		{"a URL of another scheme is hidden the same way", "ftp://SECRET@h/v1?k=SECRET", "ftp://xxxxx@h/v1?k=xxxxx"},
		{"text that does not parse is not printed", "https://SECRET@ho st/v1", "(unparsable URL)"},
		{"an empty URL stays empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RedactURL(tc.url)
			if got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.url, got, tc.want)
			}
			if strings.Contains(got, "SECRET") {
				t.Errorf("RedactURL(%q) = %q shows the secret", tc.url, got)
			}
		})
	}
}
