package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	_ Store   = (*Redis)(nil)
	_ Merger  = (*Redis)(nil)
	_ Threads = (*Redis)(nil)
)

// redisPrefix and redisThreadPrefix namespace the gateway's keys, so a
// Redis shared with other software never sees its keys collide with ours.
const (
	redisPrefix       = "toolgate:session:"
	redisThreadPrefix = "toolgate:thread:"
)

// UpstreamThreadTTL is how long a shared store keeps a thread that names
// other upstream ids (Thread.Upstream, Thread.Hidden): 30 days, how long
// OpenAI keeps a stored response by default.
const UpstreamThreadTTL = 30 * 24 * time.Hour

// maxThreadBytes bounds a thread value read from Redis: the gateway writes
// a session key, a few ids and the answers to a round's own calls (each
// cut to MaxPendingOutput), a few KB at most.
const maxThreadBytes = 64 << 10

// MaxValueBytes bounds a session value read from Redis. A stored state
// is bounded (MaxStoredNames), a few KB; a larger value is not the
// gateway's, and is refused as unreadable: read, it would be kept and
// written back on every turn (a 2 MB value injected into Redis, say).
const MaxValueBytes = 1 << 20

// Redis is a store shared by several gateway replicas, so a conversation
// keeps its discovered tools whichever replica serves its next turn. Each
// session is one JSON value that expires ttl after its last write, like
// Memory's entries. A Redis that fails three operations in a row is not
// asked for five seconds (see breaker): the store answers ErrUnavailable
// at once meanwhile.
type Redis struct {
	client *redis.Client
	ttl    time.Duration
	// opTimeout bounds one operation (of a merge, one round trip: see
	// update), every attempt, the wait for a pooled connection and any
	// dial included: the read timeout alone bounds one attempt, so behind
	// a Redis slow to answer, retries and the wait for a connection would
	// hold a request for seconds on its Get and again on its Put.
	opTimeout time.Duration
	breaker   *breaker
}

// NewRedis connects lazily to the redis:// or rediss:// URL (go-redis's URL
// options such as db, dial_timeout, read_timeout, pool_size apply; timeouts
// not given default to 1 s dial, 250 ms read and write, one retry, and a
// wait for a pooled connection as long as the read timeout). Each
// operation, all its attempts included, is bounded by the read timeout;
// a merged save (update), each of its round trips.
// logger (nil: none) hears when the store becomes unavailable and when it
// answers again. Close it when done.
// Errors never repeat the URL, which may carry a password.
func NewRedis(rawURL string, ttl time.Duration, logger *slog.Logger) (*Redis, error) {
	opt, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	r := &Redis{client: redis.NewClient(opt), ttl: ttl, breaker: newBreaker(logger)}
	if opt.ReadTimeout > 0 { // go-redis reads a negative one as none
		r.opTimeout = opt.ReadTimeout
	}
	return r, nil
}

// do runs one operation: unless the breaker is open, fn runs bounded by
// opTimeout, and its outcome feeds the breaker. redis.Nil is an answer.
// A failure wraps ErrUnavailable, what says what was being done.
func (r *Redis) do(ctx context.Context, what string, fn func(context.Context) error) error {
	return r.guard(ctx, what, func(ctx context.Context) error {
		octx, cancel := r.op(ctx)
		defer cancel()
		return fn(octx)
	})
}

// guard runs fn unless the breaker is open, and feeds the breaker its
// outcome, as do does, leaving fn to bound its round trips itself.
func (r *Redis) guard(ctx context.Context, what string, fn func(context.Context) error) error {
	probe, err := r.breaker.allow()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err = fn(ctx)
	switch {
	case err == nil, errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
		// Answers: the server is there, whatever it holds.
		r.breaker.succeeded()
		return err
	case ctx.Err() != nil: // the caller gave up, not the server
		r.breaker.abandoned(probe)
		return fmt.Errorf("%s: %w", what, err)
	case refusedCommand(err):
		// The server is there and answered at once: what it refuses
		// (OOM under maxmemory, READONLY after a failover) is that
		// command's failure, and stopping every call, reads too, for
		// it would take sessions away where only writes fail.
		r.breaker.succeeded()
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v: %w", r.opTimeout, err)
	}
	err = credentials(err)
	r.breaker.failed(probe, err)
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// op returns the context one operation runs under: ctx, bounded by
// opTimeout.
func (r *Redis) op(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.opTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.opTimeout)
}

// refusedCommand reports whether err is the server's error reply to a
// command, other than a refusal of the credentials, which no later call
// can pass either.
func refusedCommand(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && !errors.Is(credentials(err), ErrCredentials)
}

// credentials marks an error of a server that refused the credentials
// (Redis 6+ says WRONGPASS or NOAUTH, older ones "invalid password" and
// "no password is set") with ErrCredentials, so that a refused password
// is reported as such and not as an unreachable server.
func credentials(err error) error {
	for _, p := range []string{"WRONGPASS", "NOAUTH", "invalid password", "Client sent AUTH, but no password is set"} {
		if redis.HasErrorPrefix(err, p) {
			return fmt.Errorf("%w: %w", ErrCredentials, err)
		}
	}
	return err
}

// Ping checks that the server answers. It bypasses the breaker: it is
// asked once, at start-up. A refusal of the credentials is ErrCredentials.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging the redis session store: %w", credentials(err))
	}
	return nil
}

// Get returns the state under key, or ErrNotFound. A value that is not a
// session, or is over MaxValueBytes, is ErrCorrupt; of a larger value at
// most MaxValueBytes are read.
func (r *Redis) Get(ctx context.Context, key string) (State, error) {
	var s State
	if err := r.read(ctx, "session", redisPrefix+key, MaxValueBytes, &s); err != nil {
		return State{}, err
	}
	return s, nil
}

// read decodes the JSON value under key into v: ErrNotFound when there is
// none, ErrCorrupt when it is not JSON of v's shape or is over limit bytes
// (of which at most limit are read).
func (r *Redis) read(ctx context.Context, what, key string, limit int64, v any) error {
	var (
		size int64
		b    []byte
	)
	err := r.do(ctx, "reading "+what+" from redis", func(ctx context.Context) error {
		var err error
		size, b, err = fetch(ctx, r.client, key, limit)
		return err
	})
	return decode(what, key, limit, size, b, err, v)
}

// fetch reads the size of the value under key and its first limit bytes,
// in one round trip. The two are not atomic unless c is a transaction
// watching key: a value replaced in between reads as unreadable or as not
// found, which costs that turn a search, like any lost session.
func fetch(ctx context.Context, c redis.Cmdable, key string, limit int64) (int64, []byte, error) {
	pipe := c.Pipeline()
	strlen := pipe.StrLen(ctx, key)
	head := pipe.GetRange(ctx, key, 0, limit-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, nil, err
	}
	return strlen.Val(), []byte(head.Val()), nil
}

// decode decodes what fetch read of key (size, b, or its error err) into
// v, as read does.
func decode(what, key string, limit, size int64, b []byte, err error, v any) error {
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return fmt.Errorf("reading %s %s from redis: %w: not a string: %w", what, key, ErrCorrupt, err)
	case err != nil:
		return err
	case size == 0: // a missing key, or an empty value, holds nothing
		return ErrNotFound
	case size > limit:
		return fmt.Errorf("reading %s %s from redis: %w: %d bytes, over the %d-byte limit",
			what, key, ErrCorrupt, size, limit)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s %s from redis: %w: %w", what, key, ErrCorrupt, err)
	}
	return nil
}

// Put stores s under key and renews its expiry.
func (r *Redis) Put(ctx context.Context, key string, s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding session: %w", err)
	}
	return r.do(ctx, "writing session to redis", func(ctx context.Context) error {
		return r.client.Set(ctx, redisPrefix+key, b, r.ttl).Err()
	})
}

// updateAttempts bounds how many optimistic transactions update tries on
// a session that other writes keep changing under it, before it writes
// its last merge without watching.
const updateAttempts = 4

// PutMerged stores s merged into the session under key (Merge) and
// renews its expiry; see update.
func (r *Redis) PutMerged(ctx context.Context, key string, base, s State, keep int) error {
	return r.update(ctx, key, func(cur State) State { return Merge(cur, base, s, keep) })
}

// update stores what fn makes of the session under key (the zero State
// when there is none, or it is unreadable, which the write replaces) and
// renews its expiry. The read and the write are one optimistic
// transaction (WATCH, read, MULTI SET EXEC: three round trips, where Put
// is one); another replica's write in between makes it read again, so fn
// may be called more than once. Each round trip, not the whole, is
// bounded by the read timeout, so a Redis slow enough that three round
// trips overrun it, which still serves Put, serves update too. A
// transaction that another write voided is tried again only while the
// read timeout has not passed since update began, and at most
// updateAttempts times; then the key is read once more and what fn
// makes of it written with a plain SET, unwatched, so a busy or slow key
// costs two more round trips, not another transaction of three, and the
// write that voided the transaction is merged, not overwritten. A save
// thus waits at most about three read timeouts when no other write comes
// between, six when one does.
func (r *Redis) update(ctx context.Context, key string, fn func(cur State) State) error {
	k := redisPrefix + key
	return r.guard(ctx, "merging session into redis", func(ctx context.Context) error {
		start := time.Now()
		for attempt := 0; attempt < updateAttempts; attempt++ {
			if attempt > 0 && r.opTimeout > 0 && time.Since(start) >= r.opTimeout {
				break
			}
			err := r.watched(ctx, k, fn)
			if !errors.Is(err, redis.TxFailedErr) {
				return err
			}
		}
		// The last merge was made of a read that another write has since
		// replaced: writing it would drop that write. Read once more and
		// write what fn makes of it, unwatched (two round trips).
		merged, err := r.mergeRead(ctx, r.client, k, fn)
		if err != nil {
			return err
		}
		octx, cancel := r.op(ctx)
		defer cancel()
		return r.client.Set(octx, k, merged, r.ttl).Err()
	})
}

// watched runs one optimistic transaction of update's: WATCH k, read it,
// and SET what fn makes of it in MULTI EXEC, each round trip bounded by
// opTimeout. It returns redis.TxFailedErr when another write changed k
// after the WATCH. A round trip that times out leaves its connection to
// go-redis, which closes it rather than pool it with a reply still due.
func (r *Redis) watched(ctx context.Context, k string, fn func(cur State) State) error {
	// The WATCH's deadline also bounds the UNWATCH go-redis sends when the
	// transaction ends before its EXEC: a late one fails, and its
	// connection is closed, which ends the WATCH as well.
	wctx, cancel := r.op(ctx)
	defer cancel()
	return r.client.Watch(wctx, func(tx *redis.Tx) error {
		merged, err := r.mergeRead(ctx, tx, k, fn)
		if err != nil {
			return err
		}
		ectx, cancel := r.op(ctx)
		defer cancel()
		_, err = tx.TxPipelined(ectx, func(p redis.Pipeliner) error {
			return p.Set(ectx, k, merged, r.ttl).Err()
		})
		return err
	}, k)
}

// mergeRead reads k through c, in one round trip bounded by opTimeout,
// and returns the encoding of what fn makes of it: of the zero State when
// k holds nothing or nothing readable, which the write replaces.
func (r *Redis) mergeRead(ctx context.Context, c redis.Cmdable, k string, fn func(cur State) State) ([]byte, error) {
	rctx, cancel := r.op(ctx)
	size, b, err := fetch(rctx, c, k, MaxValueBytes)
	cancel()
	if err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, err
	}
	var cur State
	if decode("session", k, MaxValueBytes, size, b, err, &cur) != nil {
		cur = State{}
	}
	merged, err := json.Marshal(fn(cur))
	if err != nil {
		return nil, fmt.Errorf("encoding session: %w", err)
	}
	return merged, nil
}

// GetThread returns the thread under key, or ErrNotFound; a value that
// is not a thread is ErrCorrupt.
func (r *Redis) GetThread(ctx context.Context, key string) (Thread, error) {
	var th Thread
	if err := r.read(ctx, "thread", redisThreadPrefix+key, maxThreadBytes, &th); err != nil {
		return Thread{}, err
	}
	if th.Session == "" {
		return Thread{}, fmt.Errorf("reading thread %s from redis: %w: no session", redisThreadPrefix+key, ErrCorrupt)
	}
	return th, nil
}

// PutThread stores th under key. A thread that names only its session
// expires with the sessions (after that it leads nowhere); one that names
// other upstream ids is kept at least UpstreamThreadTTL, as long as OpenAI
// keeps a stored response by default: without it a client that continues
// from that id is refused, and one that deletes it leaves the other
// responses stored.
func (r *Redis) PutThread(ctx context.Context, key string, th Thread) error {
	b, err := json.Marshal(th)
	if err != nil {
		return fmt.Errorf("encoding thread: %w", err)
	}
	ttl := r.ttl
	if th.Upstream != "" || len(th.Hidden) > 0 {
		ttl = max(ttl, UpstreamThreadTTL)
	}
	return r.do(ctx, "writing thread to redis", func(ctx context.Context) error {
		return r.client.Set(ctx, redisThreadPrefix+key, b, ttl).Err()
	})
}

// Delete forgets key.
func (r *Redis) Delete(ctx context.Context, key string) error {
	return r.do(ctx, "deleting session from redis", func(ctx context.Context) error {
		return r.client.Del(ctx, redisPrefix+key).Err()
	})
}

// Close releases the connection pool.
func (r *Redis) Close() error {
	if err := r.client.Close(); err != nil {
		return fmt.Errorf("closing the redis session store: %w", err)
	}
	return nil
}
