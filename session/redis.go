package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var _ Store = (*Redis)(nil)

// redisPrefix namespaces the gateway's keys, so a Redis shared with other
// software never sees its keys collide with ours.
const redisPrefix = "toolgate:session:"

// Redis is a store shared by several gateway replicas, so a conversation
// keeps its discovered tools whichever replica serves its next turn. Each
// session is one JSON value that expires ttl after its last write, like
// Memory's entries.
type Redis struct {
	client *redis.Client
	ttl    time.Duration
}

// NewRedis connects lazily to the redis:// or rediss:// URL (go-redis's URL
// options such as db, dial_timeout, read_timeout, pool_size apply; timeouts
// not given default to 1 s dial, 250 ms read and write, one retry). Close it
// when done.
// Errors never repeat the URL, which may carry a password.
func NewRedis(rawURL string, ttl time.Duration) (*Redis, error) {
	opt, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &Redis{client: redis.NewClient(opt), ttl: ttl}, nil
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging the redis session store: %w", err)
	}
	return nil
}

// Get returns the state under key, or ErrNotFound.
func (r *Redis) Get(ctx context.Context, key string) (State, error) {
	b, err := r.client.Get(ctx, redisPrefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return State{}, ErrNotFound
	}
	if err != nil {
		return State{}, fmt.Errorf("reading session from redis: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("decoding session from redis: %w", err)
	}
	return s, nil
}

// Put stores s under key and renews its expiry.
func (r *Redis) Put(ctx context.Context, key string, s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding session: %w", err)
	}
	if err := r.client.Set(ctx, redisPrefix+key, b, r.ttl).Err(); err != nil {
		return fmt.Errorf("writing session to redis: %w", err)
	}
	return nil
}

// Delete forgets key.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, redisPrefix+key).Err(); err != nil {
		return fmt.Errorf("deleting session from redis: %w", err)
	}
	return nil
}

// Close releases the connection pool.
func (r *Redis) Close() error {
	if err := r.client.Close(); err != nil {
		return fmt.Errorf("closing the redis session store: %w", err)
	}
	return nil
}
