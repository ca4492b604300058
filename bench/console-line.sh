#!/usr/bin/env bash
# console-line.sh - what a console line costs brisk's host side (bench/console_line.c; docs/performance.md
# "Console output"): no KVM needed. With a BASE source tree that has built its libbrisk.a (e.g. a git worktree
# of an earlier commit, `make build/libbrisk.a` in it), the same bench linked with each runs in turn, ROUNDS times.
# Usage: bench/console-line.sh [-n ROUNDS] [--lines N] [BASE_TREE]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
rounds=3 lines=2000 base=
while [ $# -gt 0 ]; do
	case $1 in
	-n) rounds=$2; shift 2 ;;
	--lines) lines=$2; shift 2 ;;
	*) base=$1; shift ;;
	esac
done
make -s "$BUILD/libbrisk.a"
mkdir -p "$BUILD/bench"
cc_bench() { # $1 include dir, $2 libbrisk.a, $3 output
	${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -I"$1" -D_GNU_SOURCE bench/console_line.c "$2" -o "$3" \
		-pthread -ljson-c -lm
}
cc_bench include "$BUILD/libbrisk.a" "$BUILD/bench/console_line"
[ -z "$base" ] || cc_bench "$base/include" "$base/build/libbrisk.a" "$BUILD/bench/console_line.base"
for _ in $(seq "$rounds"); do
	[ -z "$base" ] || { printf 'base:  '; "$BUILD/bench/console_line.base" "$lines"; }
	printf 'brisk: '; "$BUILD/bench/console_line" "$lines"
done
