#!/bin/sh
# start-path-record.sh - record scripts/start-path.syms: what `brisk run` executes and writes on its start path.
#
# Usage: scripts/start-path-record.sh            (on a host with /dev/kvm)
#        scripts/nested-kvm.sh -- scripts/start-path-record.sh   (anywhere else)
#
# Boots build/guests/hello.elf once under valgrind's callgrind (every function executed, in every thread,
# from exec to the end) and once under lackey (every load and store), and writes the functions and the
# .data/.bss variables they touched to scripts/start-path.syms, which scripts/start-layout.sh turns into the
# binary's layout (docs/performance.md "The start path in one place"). valgrind cannot run brisk's seccomp
# filters (it does not know the system call) and hides the vDSO, so the few functions those paths run are
# added by name below. Re-record when the start path changes; a stale list only costs page faults.
set -eu
cd "$(dirname "$0")/.."
B=${BUILD:-build}
brisk=$B/brisk
guest=$B/guests/hello.elf
out=scripts/start-path.syms
[ -x "$brisk" ] && [ -f "$guest" ] || { echo "start-path-record: build brisk and the guests first (make all guests)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "start-path-record: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

valgrind -q --tool=callgrind --callgrind-out-file="$tmp/cg" "$brisk" run --kernel "$guest" --seccomp off >/dev/null
valgrind -q --tool=lackey --trace-mem=yes --log-file="$tmp/mem" "$brisk" run --kernel "$guest" --seccomp off >/dev/null

# Functions: callgrind's "fn=(id) name" records (a name is given once, then referred to by its id).
sed -n 's/^c\{0,1\}fn=([0-9]*) \(.*\)$/\1/p' "$tmp/cg" | awk '/^[A-Za-z_][A-Za-z0-9_.]*$/' | sort -u >"$tmp/fns"

# Variables: each load/store address in brisk's writable segment, mapped to the data symbol holding it.
nm -S -n "$brisk" | awk '$3 ~ /^[bBdD]$/ {print $1, $2, $4}' >"$tmp/syms"
awk -v symfile="$tmp/syms" '
	function hex(s,   i, c, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c } return v }
	BEGIN { while ((getline l < symfile) > 0) { split(l, f, " "); n++; lo[n] = hex(f[1]); hi[n] = lo[n] + hex(f[2]); name[n] = f[3] } }
	/^ [LSM] / {
		a = hex(substr($2, 1, index($2, ",") - 1))
		if (a < lo[1] || a >= hi[n]) next
		l = 1; h = n
		while (l < h) { m = int((l + h + 1) / 2); if (lo[m] <= a) l = m; else h = m - 1 }
		if (a < hi[l] && !(name[l] in seen)) { seen[name[l]] = 1; print name[l] }
	}' "$tmp/mem" | awk '/^[A-Za-z_][A-Za-z0-9_.]*$/' >"$tmp/vars"

{
	echo "# The start path of \`brisk run\`: functions it executes and variables it touches, in that order."
	echo "# Recorded by scripts/start-path-record.sh ($(date -u +%Y-%m-%d), $(uname -r)); read by scripts/start-layout.sh."
	echo "# Functions valgrind does not see: the seccomp filters' attach, the vDSO's set-up, frame registration."
	printf '%s\n' load patch_pid syscall sigfillset _dl_non_dynamic_init setup_vdso _dl_new_object _dl_add_to_namespace_list \
		_dl_lookup_symbol_x _dl_vdso_vsym do_lookup_x check_match _dl_name_match_p __register_frame_info
	echo "# Functions (callgrind)"
	cat "$tmp/fns"
	echo "# Variables (lackey), the large ones last so that the small ones share pages"
	awk -v symfile="$tmp/syms" 'BEGIN { while ((getline l < symfile) > 0) { split(l, f, " "); sz[f[3]] = f[2] } }
		{ printf "%s %s\n", sz[$1], $1 }' "$tmp/vars" | sort -s -k1,1 | awk '{print $2}'
} >"$out"
echo "start-path-record: $(grep -vc '^#' "$out") names in $out"
