#!/usr/bin/env bash
# mkinitramfs.sh -- build the initramfs of brisk's real-kernel tier.
#
# Usage: tests/linux/mkinitramfs.sh [--busybox] [--modules DIR [--override KO]...] OUT.cpio.gz
#
# A gzip'd newc cpio holding
#   /init                  tests/linux/init.c + init_net.c + init_modparams.c + init_balloon.c, built static (gcc -static -O2)
#   /dev/console, /dev/port, /dev/mem, /dev/null, /dev/ttyS0
#                          device nodes (init mounts devtmpfs over /dev anyway;
#                          the nodes are for a kernel without devtmpfs)
#   /proc /sys /dev /tmp   empty directories
# With --busybox (make demo-linux): /bin/busybox from Debian's busybox-static
# (apt-get installed when missing) and its applet links in /bin, so
# "brisk.shell=1" on the kernel command line drops into /bin/sh.
# With --modules DIR (build/linux/modules from fetch-kernel.sh: NAME.ko files
# and their load order in DIR/order): /lib/modules/NAME.ko and
# /lib/modules/order, which the init loads with "brisk.virtio=1"
# (tests/linux/run.sh builds build/linux/initramfs-virtio.cpio.gz that way;
# the plain initramfs stays small for the other boots).
# With --override KO (repeatable, with --modules): the file KO takes the place
# of DIR's module of the same name (run.sh: build/linux/initramfs-kata.cpio.gz
# gets tests/linux/build-virtio-mmio.sh's virtio_mmio.ko, DIR stays Debian's).
# The static init is also left next to OUT as "init" (tests/linux/mkrootfs.sh
# puts it on the root disk as /sbin/init).
# Rebuilt only when the init's sources, this script or busybox changed. Needs root for the
# device nodes; without root they are left out (init mknods or mounts them).
set -euo pipefail
die() { echo "mkinitramfs: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd -P)
busybox=0 modules= overrides=()
while [[ $# -gt 1 ]]; do
	case $1 in
	--busybox) busybox=1; shift ;;
	--modules) modules=$(readlink -f "$2"); shift 2 ;;
	--override) overrides+=("$(readlink -f "$2")"); shift 2 ;;
	*) break ;;
	esac
done
[[ $# -eq 1 ]] || die "usage: $0 [--busybox] [--modules DIR [--override KO]...] OUT.cpio.gz"
[[ -z $modules || -f $modules/order ]] || die "--modules $modules: no $modules/order (run tests/linux/fetch-kernel.sh)"
[[ ${#overrides[@]} -eq 0 || -n $modules ]] || die "--override needs --modules"
out=$(readlink -f "$1")
dir=$(dirname "$out")
mkdir -p "$dir"
CC=${CC:-gcc}

init=$dir/init
srcs=("$HERE/init.c" "$HERE/init_net.c" "$HERE/init_modparams.c" "$HERE/init_balloon.c")
stale=0
for f in "${srcs[@]}" "$HERE/init.h"; do [[ $f -nt $init ]] && stale=1; done
if [[ ! -x $init || $stale = 1 ]]; then
	$CC -static -O2 -Wall -Wextra -Werror -o "$init.tmp" "${srcs[@]}" ||
		die "cannot build a static init (is libc6-dev installed?)"
	mv "$init.tmp" "$init"
fi

bb=
if [[ $busybox = 1 ]]; then
	if ! dpkg-query -W -f='${db:Status-Status}' busybox-static 2>/dev/null | grep -qx installed; then
		[[ $(id -u) = 0 ]] || die "busybox-static is not installed (apt-get install busybox-static)"
		echo "mkinitramfs: installing busybox-static" >&2
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static ||
		  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static; }
		} >&2 || die "apt-get install busybox-static failed"
	fi
	bb=$(dpkg -L busybox-static | grep -E '/s?bin/busybox$' | head -n1)
	[[ -x $bb ]] || die "busybox-static installed but no busybox binary found"
fi

mods=()
if [[ -n $modules ]]; then
	while read -r m; do
		[[ -z $m || $m = \#* ]] || mods+=("$modules/$m.ko")
	done < "$modules/order"
	for o in "${overrides[@]}"; do
		found=0
		for i in "${!mods[@]}"; do
			if [[ ${mods[$i]##*/} = "${o##*/}" ]]; then
				mods[$i]=$o
				found=1
			fi
		done
		[[ -f $o && $found = 1 ]] || die "--override $o: no such file, or no module of that name in $modules/order"
	done
fi
stamp="$(cat "$init" "$HERE/mkinitramfs.sh" ${bb:+"$bb"} ${modules:+"$modules/order"} "${mods[@]}" | sha256sum | cut -c1-16)-$(id -u)"
if [[ -f $out && $(cat "$out.stamp" 2>/dev/null) = "$stamp" ]]; then
	exit 0
fi
tmp=$(mktemp -d "$dir/initramfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{dev,proc,sys,tmp,bin,sbin}
cp "$init" "$tmp/init"
if [[ $(id -u) = 0 ]]; then
	mknod -m 600 "$tmp/dev/console" c 5 1
	mknod -m 600 "$tmp/dev/port" c 1 4
	mknod -m 600 "$tmp/dev/mem" c 1 1
	mknod -m 666 "$tmp/dev/null" c 1 3
	mknod -m 660 "$tmp/dev/ttyS0" c 4 64
fi
if [[ -n $modules ]]; then
	mkdir -p "$tmp/lib/modules"
	cp "${mods[@]}" "$modules/order" "$tmp/lib/modules/"
fi
if [[ -n $bb ]]; then
	cp "$bb" "$tmp/bin/busybox"
	for a in $("$bb" --list); do
		[[ $a = busybox || -e $tmp/bin/$a ]] || ln -s busybox "$tmp/bin/$a"
	done
fi
(cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -9n) > "$out.tmp"
mv "$out.tmp" "$out"
echo "$stamp" > "$out.stamp"
echo "mkinitramfs: $out ($(stat -c %s "$out") bytes${bb:+, with busybox}${modules:+, ${#mods[@]} modules}${overrides[*]:+, ${#overrides[@]} replaced})" >&2
