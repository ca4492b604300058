#!/bin/sh
# blk-limiter.sh - the rate limiter's cost on an unlimited disk: QD1 4 KiB reads (page-cached, the loop's
# RWF_NOWAIT path) from guests/blk-limit.c, brisk as built against brisk built with the limiter's code path
# absent (-DBRISK_BLK_NO_LIMITER), interleaved, ROUNDS rounds of READS reads each; the least and the median
# of each (docs/performance.md).
#   bench/blk-limiter.sh [ROUNDS] [READS]
set -eu
ROUNDS=${1:-5}
READS=${2:-5000}
cd "$(dirname "$0")/.."
make -s -j2 build/brisk guests
make -s -j2 BUILD=build/nolimit CFLAGS="-O2 -g -DBRISK_BLK_NO_LIMITER" build/nolimit/brisk
mkdir -p build/bench
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -Iinclude -D_GNU_SOURCE bench/rl_cost.c build/libbrisk.a \
	-o build/bench/rl_cost -pthread -ljson-c -lm
build/bench/rl_cost
img=$(mktemp /tmp/blk-limiter.XXXXXX)
trap 'rm -f "$img"' EXIT
dd if=/dev/zero of="$img" bs=1M count=16 status=none
run() { # binary -> ms for READS reads
	"$1" run --kernel build/guests/blk-limit.elf --disk "$img" --cmdline "reads=$READS" 2>/dev/null |
		sed -n 's/.*CHECK reads: PASS ([0-9]* reads of [0-9]* bytes in \([0-9]*\) ms).*/\1/p'
}
run build/brisk >/dev/null # warm-up: the image in the page cache
with=""
without=""
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	a=$(run build/nolimit/brisk)
	b=$(run build/brisk)
	echo "round $i: absent $a ms, present (unlimited) $b ms"
	without="$without $a"
	with="$with $b"
	i=$((i + 1))
done
python3 - "$READS" "$without" "$with" <<'PY'
import statistics, sys
reads = int(sys.argv[1])
absent = [int(x) for x in sys.argv[2].split()]
present = [int(x) for x in sys.argv[3].split()]
# the least of the rounds is each binary's run least disturbed by other load on the host; the median too
for what, f in (("min", min), ("median", statistics.median)):
    a, p = f(absent), f(present)
    print(f"{what}: absent {a} ms ({reads * 1000 / a:.0f} reads/s), present {p} ms ({reads * 1000 / p:.0f} reads/s),"
          f" present / absent {p / a:.3f} ({(p / a - 1) * 100:+.1f}% time per read)")
PY
