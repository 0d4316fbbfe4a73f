package policy

// startupChanges names the settings the gateway reads once, at start-up,
// that next sets differently from prev, the snapshot it started with: a
// reload publishes them, but the listener, the upstream transport, the
// embeddings client and the session store were built from prev's, so
// next's take effect at the next start. Live logs them with the reload,
// so an edit that cannot take effect is not silently ignored. Only names
// are returned, never values: a URL or key may hold a secret.
func startupChanges(prev, next *Snapshot) []string {
	pg, ng := prev.Gateway, next.Gateway
	pe, ne := prev.Search.Embeddings, next.Search.Embeddings
	ps, ns := prev.Sessions, next.Sessions
	var out []string
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"gateway.listen", pg.Listen != ng.Listen},
		{"gateway.upstream", pg.Upstream != ng.Upstream},
		{"gateway.timeouts.connect", pg.ConnectTimeout != ng.ConnectTimeout},
		{"gateway.timeouts.first_byte", pg.HeaderTimeout != ng.HeaderTimeout},
		// Turning openai off (offline, off) applies live; turning it on
		// needs a client, which only a start creates.
		{"search.embeddings.provider", pe.Provider != "openai" && ne.Provider == "openai"},
		{"search.embeddings.url", pe.URL != ne.URL},
		{"search.embeddings.model", pe.Model != ne.Model},
		{"search.embeddings.key", pe.Key != ne.Key},
		{"search.embeddings.cache_dir", pe.CacheDir != ne.CacheDir},
		{"search.embeddings.cache_max_mb", pe.CacheMaxMB != ne.CacheMaxMB},
		{"search.embeddings.query_timeout", pe.QueryTimeout != ne.QueryTimeout},
		{"sessions.store", ps.Store != ns.Store},
		{"sessions.ttl", ps.TTL != ns.TTL},
		{"sessions.max_entries", ps.MaxEntries != ns.MaxEntries},
	} {
		if c.changed {
			out = append(out, c.name)
		}
	}
	return out
}
