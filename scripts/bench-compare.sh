#!/usr/bin/env bash
# The job benchmarks of two commits, alternating on one machine, compared
# with benchstat: the daily and weekly jobs (scheduler's BenchmarkDaily and
# BenchmarkWeekly, each against its single-statement reference), delivery
# (delivery's BenchmarkQueue), and queue-process against River (bench/'s
# queue suite, 16 workers). Issue 47 asks them to stay within noise across
# its refactoring:
#
#   scripts/bench-compare.sh BEFORE [AFTER] [ROUNDS]
#
# BEFORE and AFTER are commits (AFTER defaults to HEAD's working tree);
# each round runs both, the order swapped every round. Sizes:
# BENCH_USERS (default 100000), BENCH_MESSAGES (default 20000). Results go
# to bench/results/compare/<before>-<after>/. Run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
before=${1:?usage: scripts/bench-compare.sh BEFORE [AFTER] [ROUNDS]}
after=${2:-}
rounds=${3:-3}
users=${BENCH_USERS:-100000}
messages=${BENCH_MESSAGES:-20000}
go=${GO:-go}

work=$(mktemp -d /tmp/bench-compare.XXXXXX)
trap 'cd "$root"; git worktree remove --force "$work/before" 2>/dev/null || true; [ -z "$after" ] || git worktree remove --force "$work/after" 2>/dev/null || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/before" "$before"
dirs=("$work/before" "$root")
if [ -n "$after" ]; then
	git -C "$root" worktree add -q --detach "$work/after" "$after"
	dirs[1]="$work/after"
fi
names=(before after)
out="$root/bench/results/compare/$(git -C "$root" rev-parse --short "$before")-$(git -C "$root" rev-parse --short "${after:-HEAD}")"
mkdir -p "$out"
: >"$out/before.txt"
: >"$out/after.txt"
for side in 0 1; do
	(cd "${dirs[$side]}" && $go build -o "$work/bin-${names[$side]}/" ./cmd/...)
done

for round in $(seq 1 "$rounds"); do
	order="0 1"
	[ $((round % 2)) -eq 0 ] && order="1 0"
	for side in $order; do
		dir=${dirs[$side]} name=${names[$side]}
		echo "round $round: $name" >&2
		(cd "$dir" && BENCH_USERS=$users $go test -run '^$' -bench '^Benchmark(Daily|Weekly)$' -benchtime 1x -timeout 60m ./scheduler) | grep '^Benchmark' >>"$out/$name.txt"
		(cd "$dir" && BENCH_MESSAGES=$messages $go test -run '^$' -bench '^BenchmarkQueue$' -benchtime 1x -timeout 30m ./delivery) | grep '^Benchmark' >>"$out/$name.txt"
		(cd "$dir/bench" && $go run . -bin "$work/bin-$name" -suites queue -messages "$messages" -workers 16 -out "$work/results-$name" -plot '') 2>&1 |
			tee -a "$out/$name-river.txt" >&2
	done
done
(cd "$out" && $go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da before.txt after.txt) | tee "$out/benchstat.txt"
echo "queue vs River, per round: $out/before-river.txt, $out/after-river.txt" >&2
