// Package redact prints configured URLs without the credentials they may
// carry. policy.RedactURL is its exported face; internal/embeddings uses
// it directly, below policy in the import graph. It must not import any
// of the project's packages (internal/embeddings and policy both import
// it), and it must not log, keep or return the parts it hides.
package redact

import (
	"net/url"
	"strings"
)

// redacted replaces each secret part of a URL that URL prints.
const redacted = "xxxxx"

// URL returns the URL s as text safe to print in logs and errors:
// the whole userinfo (a key given as the user name, as in
// https://sk-live-KEY@host/v1, as well as a password), every query value
// (?api-key=KEY) and the fragment are replaced by "xxxxx". Query keys are
// kept, so the operator can see which parameter the URL carries; a query
// part with no "=" is replaced whole, as it may be a bare key. url.URL's
// Redacted masks the password alone. Text that does not parse as a URL is
// not printed at all.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, part := range parts {
			if key, _, ok := strings.Cut(part, "="); ok {
				parts[i] = key + "=" + redacted
			} else if part != "" {
				parts[i] = redacted
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = redacted, ""
	}
	return u.String()
}
