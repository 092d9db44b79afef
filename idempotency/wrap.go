package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Wrap makes handler idempotent. The returned function extracts the key
// from its input and Checks it (with ttl; Options.TTL when ttl <= 0):
//
//   - a new key runs handler and, when it succeeds, stores its result
//     (encoded with encoding/json) and returns it with duplicate false;
//   - a duplicate does not run handler: it returns the first run's result
//     (decoded) with duplicate true, or ErrInProgress (duplicate true) when
//     the first run has not stored one yet;
//   - when handler fails (or panics), the key is forgotten (if the store is
//     a Forgetter, as both stores of this package are) so that a retry runs
//     again, and handler's error is returned (joined with Forget's, if that
//     failed too).
//
// If storing the result fails after handler succeeded, handler's output is
// returned with that error: the operation did run, but duplicates will get
// ErrInProgress until the key expires. A key function returning "" gets
// ErrEmptyKey. Store errors are returned as is (see FailMode).
//
// Forget and StoreResult run even when ctx was cancelled during handler,
// bounded by the store's Options.Timeout.
//
// Wrap is the bot's API (its incoming-webhook handlers): the binaries use
// a Store directly.
func Wrap[In, Out any](s Store, key func(In) string, ttl time.Duration, handler func(context.Context, In) (Out, error)) func(context.Context, In) (out Out, duplicate bool, err error) {
	return func(ctx context.Context, in In) (out Out, duplicate bool, err error) {
		k := key(in)
		if k == "" {
			return out, false, ErrEmptyKey
		}
		isNew, err := s.Check(ctx, k, ttl)
		if err != nil {
			return out, false, err
		}
		if !isNew {
			res, found, err := s.GetResult(ctx, k)
			if err != nil {
				return out, true, err
			}
			if !found {
				return out, true, ErrInProgress
			}
			if err := json.Unmarshal(res, &out); err != nil {
				return out, true, fmt.Errorf("idempotency: decode the stored result: %w", err)
			}
			return out, true, nil
		}

		out, err = runOrForget(ctx, s, k, in, handler)
		if err != nil {
			return out, false, err
		}
		res, err := json.Marshal(out)
		if err != nil {
			return out, false, fmt.Errorf("idempotency: encode the result: %w", err)
		}
		if err := s.StoreResult(context.WithoutCancel(ctx), k, res, ttl); err != nil {
			return out, false, err
		}
		return out, false, nil
	}
}

// runOrForget runs handler, forgetting key when it fails or panics (the
// panic then continues).
func runOrForget[In, Out any](ctx context.Context, s Store, key string, in In, handler func(context.Context, In) (Out, error)) (out Out, err error) {
	ok := false
	defer func() {
		if ok {
			return
		}
		f, can := s.(Forgetter)
		if !can {
			return
		}
		if ferr := f.Forget(context.WithoutCancel(ctx), key); ferr != nil && err != nil {
			err = errors.Join(err, ferr)
		}
	}()
	out, err = handler(ctx, in)
	ok = err == nil
	return out, err
}
