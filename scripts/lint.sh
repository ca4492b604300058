#!/usr/bin/env bash
# lint.sh - the source checks `make check` runs first (`make lint` alone):
#   1. every C file and header tracked by git is as .clang-format says (clang-format --dry-run -Werror;
#      `make format` applies it);
#   2. every commit since the rule began has a subject of at most 72 characters (Firecracker's gitlint
#      limit; the measurements go in the body). Skipped where the checkout has no history (a shallow or
#      exported tree), said so.
# Exit status 0 when both pass; 1 with each offender named.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0

# git's list where git answers (a checkout owned by another user, or an exported tree: find's)
files=$(git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^tests/fuzz/corpus') ||
	files=$(find bench guests include scripts src tests -name '*.[ch]' -not -path 'tests/fuzz/corpus*' | sort)
[ -n "$files" ] || { echo "lint: no C files found"; exit 1; }
if ! command -v clang-format >/dev/null; then
	echo "lint: clang-format missing (scripts/deps.sh installs it)"
	exit 1
fi
# shellcheck disable=SC2086 # one word per file
if ! out=$(clang-format --dry-run -Werror $files 2>&1); then
	echo "$out" | grep -E '^[^ ].*: (error|warning):' | cut -d: -f1 | sort | uniq -c |
		awk '{printf "lint: %s: %d line(s) differ from .clang-format (make format)\n", $2, $1}'
	status=1
else
	echo "lint: $(echo "$files" | wc -l) C files as .clang-format says"
fi

# The first commit under the 72-character rule; older subjects are history.
since=8c8dcfe
if git rev-parse -q --verify "$since^{commit}" >/dev/null 2>&1; then
	long=$(git log --format='%h %s' "$since^..HEAD" | awk 'length($0) - length($1) - 1 > 72')
	if [ -n "$long" ]; then
		echo "$long" | sed 's/^/lint: commit subject over 72 characters: /'
		status=1
	else
		echo "lint: $(git rev-list --count "$since^..HEAD") commit subjects of at most 72 characters"
	fi
else
	echo "lint: commit subjects not checked: commit $since is not in this checkout's history"
fi
exit $status
