package idempotency

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store on a Redis server: the key <prefix><key> is set with
// SET NX PX ttl, and a result is kept under <prefix><key>:result with the
// same remaining TTL. Expiry is Redis's own (Options.Now is not used for it).
type Redis struct {
	base
	client *redis.Client
	owned  bool // created by ParseStore: Close closes it
}

var (
	_ Store     = (*Redis)(nil)
	_ Forgetter = (*Redis)(nil)
)

// NewRedis returns a Store on client. The client stays the caller's: Close
// does not close it.
func NewRedis(client *redis.Client, opts Options) *Redis {
	return &Redis{base: newBase("redis", opts), client: client}
}

// Close closes the client if ParseStore created it; otherwise it does
// nothing.
func (s *Redis) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

func (s *Redis) keys(key string) (marker, result string) {
	k := s.prefix + key
	return k, k + ":result"
}

// checkScript is SET marker value NX PX ttl; when the key is new, a result
// left over from an earlier life of the key (it expires a little after the
// marker) is dropped in the same atomic step.
var checkScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0`)

// storeResultScript stores the result for the marker's remaining TTL, or
// sets marker and result for ARGV[3] ms when the marker is gone.
var storeResultScript = redis.NewScript(`
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
  ttl = tonumber(ARGV[3])
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
return ttl`)

func millis(d time.Duration) int64 {
	if ms := d.Milliseconds(); ms > 0 {
		return ms
	}
	return 1
}

// markerValue is what the marker key holds: when it was set, for operators.
func (s *Redis) markerValue() string {
	return s.now().UTC().Format(time.RFC3339Nano)
}

// Check records key with SET NX and reports whether it was new.
func (s *Redis) Check(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	marker, result := s.keys(key)
	octx, cancel := s.opContext(ctx)
	defer cancel()
	n, err := checkScript.Run(octx, s.client, []string{marker, result}, s.markerValue(), millis(s.ttlOr(ttl))).Int64()
	if err != nil {
		if err := s.fail(ctx, "check", key, err); err != nil {
			return false, err
		}
		return true, nil // FailOpen: the key counts as new
	}
	return n == 1, nil
}

// StoreResult keeps result for key until the key expires (or for ttl if the
// key is unknown or expired).
func (s *Redis) StoreResult(ctx context.Context, key string, result []byte, ttl time.Duration) error {
	marker, resultKey := s.keys(key)
	octx, cancel := s.opContext(ctx)
	defer cancel()
	err := storeResultScript.Run(octx, s.client, []string{marker, resultKey}, result, s.markerValue(), millis(s.ttlOr(ttl))).Err()
	return s.fail(ctx, "store result", key, err)
}

// GetResult returns the result stored for a live key.
func (s *Redis) GetResult(ctx context.Context, key string) ([]byte, bool, error) {
	marker, resultKey := s.keys(key)
	octx, cancel := s.opContext(ctx)
	defer cancel()
	vals, err := s.client.MGet(octx, marker, resultKey).Result()
	if err != nil {
		return nil, false, s.fail(ctx, "get result", key, err)
	}
	if len(vals) != 2 || vals[0] == nil || vals[1] == nil {
		return nil, false, nil // no key, or no result yet
	}
	v, ok := vals[1].(string)
	if !ok {
		return nil, false, nil
	}
	return []byte(v), true, nil
}

// Forget deletes key and its result.
func (s *Redis) Forget(ctx context.Context, key string) error {
	marker, resultKey := s.keys(key)
	octx, cancel := s.opContext(ctx)
	defer cancel()
	return s.fail(ctx, "forget", key, s.client.Del(octx, marker, resultKey).Err())
}
