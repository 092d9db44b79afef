#!/usr/bin/env bash
# Issue 60's figures for the command layer, the shared types and the typed
# statements' nullability (docs/development.md, "Issue 60's figures"),
# counted the same way at any commit:
#
#   scripts/shape-four-figures.sh       # this checkout
#   scripts/shape-four-figures.sh DIR   # another tree, e.g. from
#                                       # git archive main | tar -x -C DIR
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir"
module=$(sed -n 's/^module //p' go.mod)

# Flags: packages outside the command layer (cmd/…, internal/cli/…,
# internal/cliflag, internal/docgen, internal/demo; the test kit aside)
# importing pflag, cobra or internal/cliflag.
flagged=$(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... |
	grep -v "^$module/\(cmd\|internal/cli\|internal/docgen\|internal/demo\|internal/testkit\)" |
	grep -E " (github.com/spf13/(pflag|cobra)|$module/internal/cliflag)( |$)" | cut -d' ' -f1 | sed "s#^$module/##" || true)
echo "packages below the command layer importing pflag, cobra or internal/cliflag: $(echo -n "$flagged" | grep -c . || true) ${flagged//$'\n'/, }"

# Application packages importing one another, each import with the number
# of distinct exported names it uses (non-test files): 1 is an import for
# one type or constant.
app="scheduler delivery verify status repair retention erase console funnel internal/metrics internal/analytics internal/seed internal/smoke"
edges=$(go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./... | sed "s#$module/##g" | awk '{for (i = 2; i <= NF; i++) print $1 " " $i}')
total=0 single=0
for a in $app; do
	for b in $app; do
		grep -qx "$a $b" <<<"$edges" || continue
		name=$(basename "$b")
		n=$(find "$a" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec grep -ohE "\b$name\.[A-Z][A-Za-z0-9_]*" {} + | sort -u | grep -c . || true)
		total=$((total + 1))
		[ "$n" -le 1 ] && single=$((single + 1))
		echo "  $a -> $b: $n names"
	done
done
echo "application packages importing one another: $total, for one name: $single"

# Nullability: the statement files, those with an outer join, the
# "-- nullable:" lines and the result columns they name (a name without
# @), the "-- not null:" lines and the columns they name.
files=$(find . -path ./bench -prune -o -path '*/node_modules' -prune -o -path '*/queries/*.sql' -print | sort)
lines() { for f in $files; do grep -Ei "$1" "$f" || true; done; }
names() { lines "^-- *$1:" | sed -E "s/^-- *$1://I" | tr ', \t' '\n\n\n' | grep -v '^@' | grep -c . || true; }
echo "statement files: $(grep -c . <<<"$files"), with an outer join: $(for f in $files; do grep -Eqi '(LEFT|RIGHT|FULL)( OUTER)? JOIN' "$f" && echo "$f"; done | grep -c . || true)"
echo "-- nullable: lines: $(lines '^-- *nullable:' | grep -c . || true), result columns named: $(names nullable)"
echo "-- not null: lines: $(lines '^-- *not null:' | grep -c . || true), result columns named: $(names 'not null')"
