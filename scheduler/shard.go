package scheduler

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxShards is the most shards a job can be split into.
const MaxShards = 1024

// Shard is one part of a job split across processes: the run handles only
// the users whose id hashes to Index, among Count shards (0 ≤ Index < Count).
// Count shards together do exactly what one unsharded run does: every user
// hashes to exactly one shard, and each shard's run is as idempotent as an
// unsharded one. The zero Shard (or any Count of 1) is every user.
type Shard struct {
	Index int
	Count int
}

// ParseShard parses "i/N", 0-based: "0/3", "1/3" and "2/3" split the users
// in three.
func ParseShard(s string) (Shard, error) {
	index, count, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, errI := strconv.Atoi(index)
	n, errN := strconv.Atoi(count)
	if !ok || errI != nil || errN != nil {
		return Shard{}, fmt.Errorf("shard %q is not i/N, like 0/3", s)
	}
	return NewShard(i, n)
}

// NewShard returns shard index of count, checked.
func NewShard(index, count int) (Shard, error) {
	if count < 1 || count > MaxShards {
		return Shard{}, fmt.Errorf("shard count must be from 1 to %d, got %d", MaxShards, count)
	}
	if index < 0 || index >= count {
		return Shard{}, fmt.Errorf("shard index must be from 0 to %d (0-based, below the count), got %d", count-1, index)
	}
	return Shard{Index: index, Count: count}, nil
}

// Sharded reports whether the shard is a part of the users, not all of them.
func (s Shard) Sharded() bool { return s.Count > 1 }

// String is "i/N", or "" for every user.
func (s Shard) String() string {
	if !s.Sharded() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// A user's shard is computed by the database alone, so every process agrees
// on it, whatever language or version it runs: the SQL function
// engagement_in_shard(user_id, @shard_index, @shard_count) of migration 20
// (PostgreSQL's 64-bit hash of the id's text, sign bit cleared, modulo the
// count), which every statement of a job calls with the run's shard. The
// planner inlines it, so a @shard_count of 1 (every user) costs nothing.
