#!/bin/sh
# The typed statements' hand-written nullability (issue 60), in the tree
# at DIR (default: this checkout): the statement files, those with an
# outer join, the "-- nullable:" lines and the result columns they name
# (a name without @), the "-- not null:" lines and the columns they name.
# Compare with an older tree: git archive REV | tar -x -C DIR.
set -eu
dir=${1:-.}
files=$(find "$dir" -path '*/queries/*.sql' -not -path '*/bench/*' -not -path '*/node_modules/*' | sort)
count() { # pattern: lines matching it, in every file
	for f in $files; do grep -Ei "$1" "$f" || true; done
}
names() { # directive: the result columns its lines name
	count "^-- *$1:" | sed -E "s/^-- *$1://I" | tr ', \t' '\n\n\n' | grep -v '^@' | grep -c . || true
}
echo "statement files: $(echo "$files" | grep -c .)"
echo "with an outer join: $(for f in $files; do grep -Eqi '(LEFT|RIGHT|FULL)( OUTER)? JOIN' "$f" && echo "$f"; done | grep -c . || true)"
echo "-- nullable: lines: $(count '^-- *nullable:' | grep -c . || true), result columns named: $(names nullable)"
echo "-- not null: lines: $(count '^-- *not null:' | grep -c . || true), result columns named: $(names 'not null')"
