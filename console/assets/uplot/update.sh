#!/bin/sh
# Replaces the embedded uPlot with version $1 from the npm registry:
#   sh console/assets/uplot/update.sh 1.6.32
set -eu
version=${1:?usage: update.sh VERSION}
dir=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar xzf uplot-*.tgz)
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$dir/"
echo "uPlot $version (https://github.com/leeoniya/uPlot), MIT, copied unchanged from the npm package's dist/ by console/assets/uplot/update.sh" > "$dir/VERSION"
