package policy

import "github.com/toolgate/toolgate/internal/redact"

// RedactURL returns the URL s as text safe to print in logs and errors:
// the whole userinfo (a key given as the user name, as in
// https://sk-live-KEY@host/v1, as well as a password), every query value
// (?api-key=KEY) and the fragment are replaced by "xxxxx". Query keys are
// kept, so the operator can see which parameter the URL carries; a query
// part with no "=" is replaced whole, as it may be a bare key. url.URL's
// Redacted masks the password alone. Text that does not parse as a URL is
// not printed at all. Print every configured URL (the upstream, the
// embeddings URL) through it.
func RedactURL(s string) string { return redact.URL(s) }
