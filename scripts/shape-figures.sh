#!/usr/bin/env bash
# The shape's figures of issue 47 (docs/development.md, "The shape,
# measured"), counted the same way at any commit:
#
#   scripts/shape-figures.sh            # this checkout
#   scripts/shape-figures.sh DIR        # another tree, e.g. from
#                                       # git archive 7559505 | tar -x -C DIR
#
# Go counts are over the module's non-test .go files, without the
# benchmark module (bench/, a module of its own) and without generated
# files ("Code generated … DO NOT EDIT."). Each figure says what it counts.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir"
module=$(sed -n 's/^module //p' go.mod)

gofiles() {
	find . -path ./bench -prune -o -path '*/node_modules' -prune -o -name '*.go' ! -name '*_test.go' -print |
		while read -r f; do grep -q '^// Code generated .* DO NOT EDIT\.$' "$f" || echo "$f"; done
}
count() { # count PATTERN [FILES…]: matching lines in the non-test Go files
	local pattern=$1
	{ gofiles | xargs grep -E -h "$pattern" 2>/dev/null || true; } | wc -l | tr -d ' '
}

# internal/sqlfile is left out of the reads (as of the arguments below):
# it is the engine the generated statements run on, whose every read is a
# generated Dest(), in the columns' order by construction, plus make sql's
# own two catalog reads. Its lines are shown apart.
scan=$(count '\.Scan\(')
foreach=$(count 'ForEachRow\(')
bypos=$(count 'RowTo(AddrOf)?StructByPos')
byname=$(count 'RowTo(AddrOf)?StructByName(Lax)?|RowToMap')
engine=$({ gofiles | grep '^./internal/sqlfile/' | xargs grep -E -h '\.Scan\(|ForEachRow\(' || true; } | wc -l | tr -d ' ')
echo "positional reads (.Scan, pgx.ForEachRow, RowTo…ByPos lines) outside internal/sqlfile: $((scan + foreach + bypos - engine)) ($scan Scan and $foreach ForEachRow with internal/sqlfile's $engine, $bypos ByPos); by name: $byname"

args=$({ gofiles | grep -v '^./internal/sqlfile/' | xargs grep -E -h 'sqlfile\.(Args|Shared)\{|pgx\.(Strict)?NamedArgs\{' || true; } | wc -l | tr -d ' ')
echo "map[string]any statement arguments (sqlfile.Args{, sqlfile.Shared{, pgx.NamedArgs{ literals): $args"

cli=$(find internal/cli -maxdepth 1 -name '*.go' ! -name '*_test.go' -print0 | xargs -0 cat | wc -l | tr -d ' ')
clisub=$(find internal/cli -name '*.go' ! -name '*_test.go' -print0 | xargs -0 cat | wc -l | tr -d ' ')
echo "internal/cli lines (non-test .go): $cli in the package, $clisub with its subpackages"

# SQL functions: every CREATE [OR REPLACE] FUNCTION of the schema, by
# name, in the migrations' history (up and down files: a down file
# restores the body before) and in the rest of the tree (the current
# schema, migrations/current/schema.sql, once it exists).
fns() { { grep -h -o -i -E 'create (or replace )?function +(public\.)?[a-z_0-9]+' "$@" 2>/dev/null || true; } |
	sed -E 's/.* (public\.)?//' | tr 'A-Z' 'a-z' | sort; }
history=$(fns migrations/[0-9]*.sql | uniq -c)
names=$(echo "$history" | awk '{print $2}')
others=$(find . -path ./bench -prune -o -path '*/node_modules' -prune -o -name '*.sql' ! -path './migrations/[0-9]*' -print)
current=$(fns $others | grep -Fx -f <(echo "$names") | uniq -c || true)
echo "SQL functions: $(echo "$names" | grep -c .); bodies in the migrations' history (up and down): $(echo "$history" | awk '{s += $1} END {print s}'), most: $(echo "$history" | sort -rn | head -1 | awk '{print $2 " " $1 "x"}')"
echo "  bodies outside the history: $(echo "$current" | awk '{s += $1} END {print s + 0}') of $(echo "$current" | grep -c . || true) functions, $(echo "$current" | awk '$1 > 1' | grep -c . || true) of them more than once"
echo "move/dry-run twins (*_dry_run.sql statement files): $(find . -path ./bench -prune -o -name '*_dry_run.sql' -print | wc -l | tr -d ' ')"

if go list -deps ./verify | grep -qx "$module/scheduler"; then
	echo "verify imports scheduler: yes"
else
	echo "verify imports scheduler: no"
fi
