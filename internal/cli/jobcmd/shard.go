package jobcmd

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// completionIndexEnv is the variable Kubernetes sets, 0-based, in each pod
// of an Indexed Job.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// shardFlags split a job's users across processes: --shard i/N names the
// part outright; --shards N takes i from JOB_COMPLETION_INDEX, so one
// Indexed Job manifest runs every shard.
type shardFlags struct {
	shard           string
	shards          int
	completionIndex string // JOB_COMPLETION_INDEX, through a hidden flag
}

func (f *shardFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.shard, "shard", "", "handle only the users of shard i of N, 0-based, e.g. 1/3")
	cliflag.BindEnv(fs, "shard", "ENGAGEMENT_SHARD")
	fs.IntVar(&f.shards, "shards", 0, "split the users in N shards and handle the one "+completionIndexEnv+" names (a Kubernetes Indexed Job)")
	cliflag.BindEnv(fs, "shards", "ENGAGEMENT_SHARDS")
	fs.StringVar(&f.completionIndex, "completion-index", "", "the shard --shards handles (default "+completionIndexEnv+")")
	cliflag.BindEnv(fs, "completion-index", completionIndexEnv)
	_ = fs.MarkHidden("completion-index") // Kubernetes sets it; people use --shard
}

// resolve returns the shard to run (the zero Shard: every user).
func (f *shardFlags) resolve() (scheduler.Shard, error) {
	switch {
	case f.shard != "" && f.shards != 0:
		return scheduler.Shard{}, cli.Usagef("give --shard i/N or --shards N, not both")
	case f.shard != "":
		s, err := scheduler.ParseShard(f.shard)
		if err != nil {
			return scheduler.Shard{}, cli.Usagef("--shard: %v", err)
		}
		return s, nil
	case f.shards != 0:
		v := f.completionIndex
		if strings.TrimSpace(v) == "" {
			return scheduler.Shard{}, cli.Usagef("--shards %d needs %s (set by a Kubernetes Indexed Job); use --shard i/N elsewhere", f.shards, completionIndexEnv)
		}
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return scheduler.Shard{}, cli.Usagef("%s %q is not a number", completionIndexEnv, v)
		}
		s, err := scheduler.NewShard(i, f.shards)
		if err != nil {
			return scheduler.Shard{}, cli.Usagef("--shards %d with %s=%d: %v", f.shards, completionIndexEnv, i, err)
		}
		return s, nil
	}
	return scheduler.Shard{}, nil
}
