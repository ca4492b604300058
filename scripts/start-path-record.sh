#!/bin/sh
# start-path-record.sh - record scripts/start-path.syms: what `brisk run` executes and writes on its start path.
#
# Usage: scripts/start-path-record.sh            (on a host with /dev/kvm)
#        scripts/nested-kvm.sh -- scripts/start-path-record.sh   (anywhere else)
#
# Boots build/guests/hello.elf under valgrind's callgrind (every function executed, in every thread and
# process, from exec to the end) and under lackey (every load and store), with `brisk run` and through the
# API as Firecracker's users do (--api-sock, PUT /boot-source, InstanceStart), restores a snapshot of the
# counter guest (`brisk restore`), and writes the functions and the .data/.bss variables they touched to
# scripts/start-path.syms, which scripts/start-layout.sh turns into the
# binary's layout (docs/performance.md "The start path in one place"). valgrind cannot run brisk's seccomp
# filters (it does not know the system call) and hides the vDSO, so the few functions those paths run are
# added by name below. Re-record when the start path changes; a stale list only costs page faults.
set -eu
cd "$(dirname "$0")/.."
B=${BUILD:-build}
brisk=$B/brisk
guest=$B/guests/hello.elf
out=scripts/start-path.syms
if [ ! -x "$brisk" ] || [ ! -f "$guest" ]; then
	echo "start-path-record: build brisk and the guests first (make all guests)" >&2
	exit 2
fi
command -v valgrind >/dev/null || { echo "start-path-record: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The same boot as Firecracker's users start it: `firecracker --api-sock S`, then PUT /boot-source and
# InstanceStart (the process ends with its guest). valgrind follows the API's HTTP helper (a fork) too.
api_boot() { # $1: a name for this pass; then valgrind's tool options
	name=$1
	shift
	sock=$tmp/$name.sock
	valgrind -q "$@" "$brisk" --api-sock "$sock" --no-seccomp >/dev/null &
	pid=$!
	i=0
	while [ ! -S "$sock" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	curl -sf --unix-socket "$sock" -X PUT http://localhost/boot-source -H 'Content-Type: application/json' \
		-d "{\"kernel_image_path\": \"$(realpath "$guest")\"}" >/dev/null
	curl -sf --unix-socket "$sock" -X PUT http://localhost/actions -H 'Content-Type: application/json' \
		-d '{"action_type": "InstanceStart"}' >/dev/null
	wait $pid
}
# A restore: the counter guest snapshotted at its second line (run with --api-sock, paused, PUT
# /snapshot/create), then `brisk restore` of it, which counts on to its stop=30 and resets.
api() { # socket method path body
	curl -sf --unix-socket "$1" -X "$2" "http://localhost$3" -H 'Content-Type: application/json' -d "$4" >/dev/null
}
snapshot_counter() {
	sock=$tmp/snap.sock
	"$brisk" run --kernel "$B/guests/counter.elf" --cmdline "stop=30" --memory 64 --api-sock "$sock" >"$tmp/snap.out" &
	pid=$!
	i=0
	while ! grep -q '^count 2 ' "$tmp/snap.out" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	api "$sock" PATCH /vm '{"state": "Paused"}'
	api "$sock" PUT /snapshot/create "{\"snapshot_path\": \"$tmp/v.state\", \"mem_file_path\": \"$tmp/v.mem\"}"
	kill "$pid"
	wait "$pid" || true
}
command -v curl >/dev/null || { echo "start-path-record: needs curl (apt-get install curl)" >&2; exit 2; }
snapshot_counter
restore() { valgrind -q "$@" "$brisk" restore --snapshot "$tmp/v.state" --mem "$tmp/v.mem" --seccomp off >/dev/null; }
restore --tool=callgrind --callgrind-out-file="$tmp/cg.restore"
restore --tool=lackey --trace-mem=yes --log-file="$tmp/mem.restore"
valgrind -q --tool=callgrind --callgrind-out-file="$tmp/cg.run" "$brisk" run --kernel "$guest" --seccomp off >/dev/null
valgrind -q --tool=lackey --trace-mem=yes --log-file="$tmp/mem.run" "$brisk" run --kernel "$guest" --seccomp off >/dev/null
api_boot api-cg --tool=callgrind --callgrind-out-file="$tmp/cg.api.%p"
api_boot api-mem --tool=lackey --trace-mem=yes --log-file="$tmp/mem.api.%p"

# Functions: callgrind's "fn=(id) name" records (a name is given once, then referred to by its id). Those
# of `brisk run` first, then what the API adds, then what a restore adds: each path's code stays together.
fns() { cat "$@" | sed -n 's/^c\{0,1\}fn=([0-9]*) \(.*\)$/\1/p' | awk '/^[A-Za-z_][A-Za-z0-9_.]*$/' | sort -u; }
fns "$tmp/cg.run" >"$tmp/fns.run"
fns "$tmp"/cg.api.* | grep -vxF -f "$tmp/fns.run" >"$tmp/fns.api" || true
cat "$tmp/fns.run" "$tmp/fns.api" >"$tmp/fns"
fns "$tmp/cg.restore" | grep -vxF -f "$tmp/fns" >"$tmp/fns.restore" || true

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
	}' "$tmp"/mem.* | awk '/^[A-Za-z_][A-Za-z0-9_.]*$/' >"$tmp/vars"

{
	echo "# The start paths of \`brisk run\`, an API's InstanceStart and \`brisk restore\`: functions executed, variables touched."
	echo "# Recorded by scripts/start-path-record.sh ($(date -u +%Y-%m-%d), $(uname -r)); read by scripts/start-layout.sh."
	echo "# Functions valgrind does not see: the seccomp filters' attach, the vDSO's set-up, frame registration."
	printf '%s\n' load patch_pid syscall sigfillset __lll_lock_wait confine_main _dl_non_dynamic_init setup_vdso _dl_new_object _dl_add_to_namespace_list \
		_dl_lookup_symbol_x _dl_vdso_vsym do_lookup_x check_match _dl_name_match_p __register_frame_info
	echo "# Functions of brisk run (callgrind)"
	cat "$tmp/fns.run"
	echo "# Functions the API adds (its HTTP helper, the requests, InstanceStart)"
	cat "$tmp/fns.api"
	echo "# Functions a restore adds"
	cat "$tmp/fns.restore"
	echo "# Variables (lackey), the large ones last so that the small ones share pages"
	awk -v symfile="$tmp/syms" 'BEGIN { while ((getline l < symfile) > 0) { split(l, f, " "); sz[f[3]] = f[2] } }
		{ printf "%s %s\n", sz[$1], $1 }' "$tmp/vars" | sort -s -k1,1 | awk '{print $2}'
} >"$out"
echo "start-path-record: $(grep -vc '^#' "$out") names in $out"
