package session

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Default network timeouts for the Redis store. They are far tighter than
// go-redis's own (5 s dial, 3 s read) because the state is a cache: a slow
// Redis must cost a request a repeated search, not seconds of latency.
const (
	redisDialTimeout  = time.Second
	redisReadTimeout  = 250 * time.Millisecond
	redisWriteTimeout = 250 * time.Millisecond
)

// ParseRedisURL parses a redis:// or rediss:// session store URL into
// go-redis options with the store's defaults (see NewRedis). It is the one
// parser of the URL, so `gateway validate` refuses exactly what `serve`
// refuses. Errors give the reason but never the URL or its password.
func ParseRedisURL(rawURL string) (*redis.Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the redis store URL: %w", urlReason(rawURL, err))
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("parsing the redis store URL: scheme %q; want redis:// or rediss://", u.Scheme)
	}
	// go-redis would dial localhost:6379 for a URL without a host; a
	// store shared by replicas is never meant to be that by accident.
	if u.Hostname() == "" {
		return nil, errors.New("parsing the redis store URL: no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("parsing the redis store URL: port %q is not between 1 and 65535", p)
		}
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the redis store URL: %w", redact(err, u))
	}
	q := u.Query()
	if !q.Has("dial_timeout") {
		opt.DialTimeout = redisDialTimeout
	}
	if !q.Has("read_timeout") {
		opt.ReadTimeout = redisReadTimeout
	}
	if opt.ReadTimeout <= 0 {
		// It bounds each operation too (NewRedis): go-redis reads 0 as
		// its default and a negative one as none, and with none a Redis
		// that stalls with its connections open holds every request.
		return nil, fmt.Errorf("parsing the redis store URL: read_timeout %v; want a positive duration such as 250ms", opt.ReadTimeout)
	}
	if !q.Has("write_timeout") {
		opt.WriteTimeout = redisWriteTimeout
	}
	if !q.Has("max_retries") {
		opt.MaxRetries = 1
	}
	// go-redis waits ReadTimeout+1s for a free connection by default: with
	// a slow Redis and a full pool, 300 concurrent requests waited up to
	// 2.8-5.4 s. A request never waits longer for a connection than for a
	// reply.
	if !q.Has("pool_timeout") && opt.ReadTimeout > 0 {
		opt.PoolTimeout = opt.ReadTimeout
	}
	// go-redis dials five times per command by default; against a Redis
	// that is down that turns every request into seconds of waiting.
	opt.DialerRetries = 1
	// Without it go-redis ignores the context's deadline on the socket,
	// and an operation's bound (see Redis.op) would not hold.
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// urlReason is url.Parse's reason without the URL it quotes, and without
// any part of it at all when the URL has user info: a password with an
// unescaped '/', '?', '#' or '%' is cut up by the parser and would be
// quoted back as a "port" or an "escape".
func urlReason(rawURL string, err error) error {
	if strings.Contains(rawURL, "@") {
		return errors.New("malformed URL (a password with reserved characters such as / ? # % @ must be percent-encoded)")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return errors.New("malformed URL")
}

// redact returns go-redis's reason without its "redis: " prefix, or none
// if it quotes the URL's password. go-redis's URL errors name options and
// values, not the password, but a value is the operator's text and this
// is cheap insurance.
func redact(err error, u *url.URL) error {
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	if p, ok := u.User.Password(); ok && p != "" && strings.Contains(msg, p) {
		return errors.New("invalid URL (the reason is withheld: it repeats the password)")
	}
	return errors.New(msg)
}
