#!/usr/bin/env bash
# Counts the pairs of places sharing six or more lines over the non-test Go files of the
# repository (issue 36's repetition figure): copies every tracked *.go file that is not a
# *_test.go into a temporary tree and runs `duplicates --most 200` there. Run from the root.
set -euo pipefail
tmp=$(mktemp -d)
git ls-files '*.go' | grep -v '_test\.go$' | while read -r f; do
	mkdir -p "$tmp/$(dirname "$f")"
	cp "$f" "$tmp/$f"
done
duplicates --repo "$tmp" --most 200 --seconds 300 | sed "s|$tmp/||g"
rm -rf "$tmp"
