#!/usr/bin/env bash
# kvm-diag.sh PID -- what a running (possibly hung) brisk process and its VM are doing.
#
# Prints, to stdout: each thread's state, CPU time and kernel stack; KVM's
# debugfs counters for the process's VM sampled twice, SAMPLE_S seconds apart
# (a guest that makes progress moves them; one spinning in KVM moves only some);
# and the kvm tracepoints for one second, summarised by event. Used by the test
# suites when a boot does not end in time, so the log says where it hung.
# Needs root for stacks, debugfs and tracefs; prints what it can otherwise.
# Exit status 0, or 2 when PID is not a running process.
set -u
pid=${1:-}
[[ $pid =~ ^[0-9]+$ && -d /proc/$pid ]] || { echo "usage: kvm-diag.sh PID (a running process)" >&2; exit 2; }
SAMPLE_S=${SAMPLE_S:-2}
DBG=/sys/kernel/debug
TR=/sys/kernel/tracing
STATS="exits io_exits mmio_exits halt_exits halt_wakeup pf_taken pf_fixed pf_guest irq_injections
nmi_injections insn_emulation insn_emulation_fail irq_window_exits nmi_window_exits request_irq_exits
signal_exits l1d_flush tlb_flush remote_tlb_flush"

echo "=== kvm-diag: pid $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline | cut -c1-200))"
echo "load: $(cat /proc/loadavg)"
for t in /proc/"$pid"/task/*; do
	# fields 3 (state), 14/15 (utime/stime, clock ticks) of /proc/TID/stat, after the comm
	read -r state utime stime < <(sed 's/^.*) //' "$t/stat" | awk '{print $1, $12, $13}')
	echo "-- thread ${t##*/} $(cat "$t/comm" 2>/dev/null) state $state utime $utime stime $stime wchan $(cat "$t/wchan" 2>/dev/null)"
	head -n 6 "$t/stack" 2>/dev/null | sed 's/^/   /'
done

[[ -d $DBG/kvm ]] || mount -t debugfs nodev "$DBG" 2>/dev/null
snap() { # $1 = VM's debugfs directory
	local s out=
	for s in $STATS; do [[ -r $1/$s ]] && out+="$s=$(cat "$1/$s") "; done
	echo "$out"
}
found=0
for d in "$DBG"/kvm/"$pid"-*; do
	[[ -d $d ]] || continue
	found=1
	a=$(snap "$d")
	sleep "$SAMPLE_S"
	b=$(snap "$d")
	echo "-- KVM counters of ${d##*/} (debugfs), change over ${SAMPLE_S} s:"
	join <(tr ' ' '\n' <<<"$a" | grep = | tr = ' ' | sort) <(tr ' ' '\n' <<<"$b" | grep = | tr = ' ' | sort) |
		awk '{printf "   %-20s %14s  %+d\n", $1, $3, $3 - $2}'
	for v in "$d"/vcpu*; do
		[[ -d $v ]] && echo "   ${v##*/}: $(cd "$v" && for f in *; do [[ -f $f && -r $f ]] && printf '%s=%s ' "$f" "$(head -c 40 "$f" | tr -d '\n')"; done)"
	done | head -n 8
done
[[ $found = 1 ]] || echo "-- no KVM debugfs directory for pid $pid (not root, or debugfs not mounted)"

[[ -d $TR/events ]] || mount -t tracefs nodev "$TR" 2>/dev/null
if [[ -w $TR/events/kvm/enable ]]; then
	inst=$TR/instances/kvm-diag.$$
	if mkdir "$inst" 2>/dev/null; then
		echo 4096 >"$inst/buffer_size_kb"
		echo 1 >"$inst/events/kvm/enable"
		sleep 1
		echo 0 >"$inst/tracing_on"
		echo "-- kvm tracepoints for 1 s, by event (all VMs on this host):"
		grep -v '^#' "$inst/trace" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^kvm_[a-z_0-9]+:$/) {print $i; break}}' |
			sort | uniq -c | sort -rn | head -n 12 | sed 's/^/   /'
		echo "-- first events:"
		grep -v '^#' "$inst/trace" | head -n 24 | cut -c1-200 | sed 's/^/   /'
		echo 0 >"$inst/events/kvm/enable"
		rmdir "$inst" 2>/dev/null
	fi
else
	echo "-- no kvm tracepoints (not root, or tracefs missing)"
fi
echo "-- kernel log (tail):"
dmesg 2>/dev/null | tail -n 8 | sed 's/^/   /'
echo "=== kvm-diag: end"
