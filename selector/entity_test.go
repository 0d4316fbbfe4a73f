package selector

import "testing"

func TestNameEntityTakesTheLastWordSingular(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"snake case ends in the object", "repo_create_issue", "issue"},
		{"camel case ends in the object", "listPullRequests", "request"},
		{"dashes and dots split words", "chat.post-message", "message"},
		{"a trailing separator is ignored", "fs_read_file_", "file"},
		{"a double s is not a plural", "mail_set_address", "address"},
		{"a single word is its own entity", "calculator", "calculator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nameEntity(tc.in); got != tc.want {
				t.Errorf("nameEntity(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
