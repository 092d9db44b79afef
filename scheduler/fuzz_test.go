package scheduler

import "testing"

// FuzzParseShard: whatever the input, a parsed shard is in range and its
// text parses back to the same shard.
func FuzzParseShard(f *testing.F) {
	for _, seed := range []string{"0/3", "2/3", "3/3", "-1/2", "0/0", "1/1024", " 1/2 ", "1/2/3", "+1/2", "99999999999999999999/1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shard, err := ParseShard(s)
		if err != nil {
			return
		}
		if shard.Count < 1 || shard.Count > MaxShards || shard.Index < 0 || shard.Index >= shard.Count {
			t.Fatalf("ParseShard(%q) = %+v: out of range", s, shard)
		}
		if !shard.Sharded() {
			return
		}
		back, err := ParseShard(shard.String())
		if err != nil || back != shard {
			t.Fatalf("ParseShard(%q) = %+v, whose text %q parses to %+v, %v", s, shard, shard.String(), back, err)
		}
	})
}
