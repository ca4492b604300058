#!/usr/bin/env bash
# fetch-kernel.sh -- get Debian's stock amd64 kernel for brisk's real-kernel tier.
#
# Downloads (apt-get download: nothing is installed, /boot is never touched)
# the linux-image-<ver>-amd64 package that linux-image-amd64 depends on,
# unpacks it with dpkg-deb -x and leaves in build/linux/:
#   vmlinuz         the bzImage, as Debian ships it
#   vmlinux         the uncompressed ELF, extracted from the bzImage's
#                   compressed payload (xz, zstd or gzip), only when it carries
#                   the PVH note (XEN_ELFNOTE_PHYS32_ENTRY; Debian: CONFIG_PVH=y)
#   kernel.version  e.g. 6.1.0-57-amd64
#   modules/        the modules the virtio tests load (WANT_MODULES below) and
#                   their dependencies, as NAME.ko, uncompressed (a package's
#                   .ko.xz/.ko.zst/.ko.gz are decompressed here, so the init
#                   needs no MODULE_INIT_COMPRESSED_FILE; Debian 12's 6.1 has
#                   CONFIG_MODULE_COMPRESS_NONE=y: plain .ko), and
#   modules/order   their names in load order (dependencies first), one a
#                   line; modules/builtin: wanted ones built into the kernel
# The rest of the package's lib/ (~400 MiB of modules) is not kept.
# Reuses the kernel scripts/nested-kvm.sh already unpacked in build/nested/
# (same package) instead of downloading it twice. Cached and idempotent: a
# second run does nothing unless linux-image-amd64 now names another version.
# BRISK_LINUX_NO_REUSE=1: download and extract here even when build/nested/ has it.
# Exit status 0 on success; 1 with a one-line reason otherwise.
set -euo pipefail
# Dependencies ("depends" in each module's .modinfo, what depmod writes into
# modules.dep; the package ships no modules.dep, depmod makes it at install)
# are added before each module. Soft dependencies are not followed: ext4 and
# jbd2 ask for "crypto-crc32c" (metadata_csum, on by default in mkfs.ext4),
# so crc32c_generic is named here.
WANT_MODULES="virtio virtio_ring virtio_mmio virtio_blk virtio-rng virtio_console crc32c_generic crc16 mbcache jbd2 ext4
virtio_net vmw_vsock_virtio_transport virtio_balloon"
die() { echo "fetch-kernel: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUT=$BUILD/linux
NESTED=$ROOT/build/nested
mkdir -p "$OUT"
exec 9>"$OUT/.fetch.lock"
flock 9

for t in apt-get apt-cache dpkg-deb modinfo; do command -v $t >/dev/null || die "$t not found (Debian/Ubuntu host needed)"; done

# Which package? The one linux-image-amd64 depends on (re-resolved only when
# the apt lists changed since the last run: apt-cache is slow).
kpkg=
if [[ -f $OUT/kernel.pkg && -z $(find /var/lib/apt/lists -maxdepth 1 -newer "$OUT/kernel.pkg" -name '*Packages*' 2>/dev/null | head -n1) ]]; then
	kpkg=$(cat "$OUT/kernel.pkg")
fi
[[ -n $kpkg ]] || kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1 || true)
if [[ -z $kpkg ]]; then
	apt-get update -qq >&2 || true
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1 || true)
fi
[[ -n $kpkg ]] || kpkg=$(cat "$OUT/kernel.pkg" 2>/dev/null || cat "$NESTED/kernel.pkg" 2>/dev/null || true)
[[ -n $kpkg ]] || die "cannot determine the kernel package (apt-cache depends linux-image-amd64)"
kver=${kpkg#linux-image-}

modules_stamp="$kver: $WANT_MODULES"
modules_done() { [[ -f $OUT/modules/.done && $(cat "$OUT/modules/.done") = "$modules_stamp" ]]; }
kernel_done() { [[ -f $OUT/.done && $(cat "$OUT/kernel.version" 2>/dev/null) = "$kver" && -f $OUT/vmlinuz ]]; }
if kernel_done && modules_done; then
	echo "fetch-kernel: $kpkg cached in $OUT" >&2
	exit 0
fi

# The wanted modules and their dependencies from $1 (lib/modules/VER of the package) into $OUT/modules.
extract_modules() {
	local mdir=$1 tmp f
	[[ -d $mdir/kernel ]] || { echo "fetch-kernel: warning: no modules in the package ($mdir)" >&2; return 1; }
	tmp=$OUT/modules.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	local -A path=() seen=()
	local order=() builtin=()
	# module name (with _ for -) -> its file
	while IFS= read -r f; do
		local b=${f##*/}
		b=${b%%.ko*}
		path[${b//-/_}]=$f
	done < <(find "$mdir/kernel" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz')
	add_mod() {
		local key=${1//-/_} f name d
		[[ -n ${seen[$key]:-} ]] && return 0
		seen[$key]=1
		f=${path[$key]:-}
		if [[ -z $f ]]; then
			if grep -qE "/(${key}|${key//_/-})\.ko" "$mdir/modules.builtin" 2>/dev/null; then
				builtin+=("$1")
				return 0
			fi
			echo "fetch-kernel: module $1 is neither in the package nor built in" >&2
			return 1
		fi
		name=${f##*/}
		name=${name%%.ko*}
		case $f in
		*.ko.xz) xz -dc "$f" > "$tmp/$name.ko" ;;
		*.ko.zst) zstd -dcq "$f" > "$tmp/$name.ko" ;;
		*.ko.gz) gzip -dc "$f" > "$tmp/$name.ko" ;;
		*) cp "$f" "$tmp/$name.ko" ;;
		esac
		for d in $(modinfo -F depends "$tmp/$name.ko" | tr , ' '); do add_mod "$d" || return 1; done
		order+=("$name")
	}
	local m
	for m in $WANT_MODULES; do add_mod "$m" || { rm -rf "$tmp"; return 1; }; done
	printf '%s\n' "${order[@]}" > "$tmp/order"
	printf '%s\n' "${builtin[@]}" > "$tmp/builtin"
	echo "$modules_stamp" > "$tmp/.done"
	rm -rf "$OUT/modules"
	mv "$tmp" "$OUT/modules"
	echo "fetch-kernel: $OUT/modules: ${order[*]} ($(du -sh "$OUT/modules" | cut -f1))" >&2
}

kernel_done || rm -f "$OUT/.done" "$OUT/vmlinuz" "$OUT/vmlinux" "$OUT/kernel.version" "$OUT/config"

# 1. the package's files: from scripts/nested-kvm.sh's cache, or download
kdir=$NESTED/kernel-$kver
mdir=lib/modules/$kver
if [[ ${BRISK_LINUX_NO_REUSE:-0} != 1 && -f $kdir/.done && -f $kdir/boot/vmlinuz-$kver && -d $kdir/$mdir/kernel ]]; then
	echo "fetch-kernel: reusing $kpkg unpacked by scripts/nested-kvm.sh ($kdir)" >&2
	modules_done || extract_modules "$kdir/$mdir" || die "cannot extract the modules from $kdir/$mdir"
else
	kdir=$OUT/pkg-$kver
	# (a copy unpacked before the modules were kept has no lib/: unpack again)
	if [[ -f $kdir/.done && ! -d $kdir/$mdir/kernel ]] && ! modules_done; then
		echo "fetch-kernel: $kdir was unpacked without its modules: unpacking $kpkg again" >&2
		rm -f "$kdir/.done"
	fi
	if [[ ! -f $kdir/.done ]]; then
		echo "fetch-kernel: downloading $kpkg (apt-get download; nothing is installed)" >&2
		rm -rf "$kdir" "$OUT/dl"
		mkdir -p "$OUT/dl"
		(cd "$OUT/dl" && apt-get download "$kpkg" >/dev/null 2>&1) ||
			{ apt-get update -qq >&2 && (cd "$OUT/dl" && apt-get download "$kpkg" >&2); } ||
			die "apt-get download $kpkg failed"
		dpkg-deb -x "$OUT"/dl/"$kpkg"_*.deb "$kdir.tmp"
		rm -rf "$kdir"
		mv "$kdir.tmp" "$kdir"
		rm -rf "$OUT/dl"
		# keep only what the tier uses (the modules are ~400 MiB)
		extract_modules "$kdir/$mdir" || die "cannot extract the modules from $kpkg"
		rm -rf "${kdir:?}/lib" "${kdir:?}/usr"
		touch "$kdir/.done"
	fi
	modules_done || die "no modules extracted from $kpkg (remove $kdir to unpack it again)"
fi
if kernel_done; then # only the modules were missing
	[[ -f $OUT/config || ! -f $kdir/boot/config-$kver ]] || cp "$kdir/boot/config-$kver" "$OUT/config"
	echo "fetch-kernel: $kpkg cached in $OUT, modules added" >&2
	exit 0
fi
vmlinuz=$kdir/boot/vmlinuz-$kver
[[ -f $vmlinuz ]] || die "no $vmlinuz in $kpkg"
cp "$vmlinuz" "$OUT/vmlinuz.tmp" && mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
[[ -f $kdir/boot/config-$kver ]] && cp "$kdir/boot/config-$kver" "$OUT/config"

# 2. the uncompressed vmlinux: the first compressed stream in the bzImage
# that decompresses to an ELF (what the kernel's scripts/extract-vmlinux does)
has_pvh_note() { # ELF file -> 0 if it has a Xen note of type 18 (XEN_ELFNOTE_PHYS32_ENTRY)
	/usr/bin/python3 - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
if d[:4] != b"\x7fELF" or d[4] != 2: sys.exit(1)
phoff, = struct.unpack_from("<Q", d, 0x20); phentsize, phnum = struct.unpack_from("<HH", d, 0x36)
for i in range(phnum):
    p_type, _, p_off, _, _, p_filesz = struct.unpack_from("<IIQQQQ", d, phoff + i * phentsize)
    if p_type != 4: continue
    o, end = p_off, p_off + p_filesz
    while o + 12 <= end:
        nsz, dsz, typ = struct.unpack_from("<III", d, o)
        name = d[o + 12:o + 12 + nsz].rstrip(b"\0")
        if name == b"Xen" and typ == 18: sys.exit(0)
        o += 12 + (nsz + 3) // 4 * 4 + (dsz + 3) // 4 * 4
sys.exit(1)
PY
}
extract() { # $1 = magic (printf escapes) $2 = decompressor command
	local off
	for off in $(LC_ALL=C grep -aboF "$(printf "$1")" "$vmlinuz" 2>/dev/null | cut -d: -f1 | head -n 8); do
		# (decompressors complain about the bytes after the stream: judge by the result)
		tail -c +"$((off + 1))" "$vmlinuz" | $2 > "$OUT/vmlinux.tmp" 2>/dev/null || true
		if [[ $(head -c4 "$OUT/vmlinux.tmp" | od -An -tx1 | tr -d ' \n') = 7f454c46 ]]; then
			return 0
		fi
	done
	rm -f "$OUT/vmlinux.tmp"
	return 1
}
if [[ ${BRISK_LINUX_NO_REUSE:-0} != 1 && -f $kdir/vmlinux.pvh ]]; then
	cp "$kdir/vmlinux.pvh" "$OUT/vmlinux.tmp" # scripts/nested-kvm.sh extracted it already
elif ! { extract '\3757zXZ' 'xz -dc' || extract '\050\265\057\375' 'zstd -dcq' ||
	extract '\037\213\010' 'gzip -dc' || extract '\002\041\114\030' 'lz4 -dc'; }; then
	echo "fetch-kernel: warning: no compressed vmlinux found in $vmlinuz; only the bzImage path will be tested" >&2
fi
if [[ -f $OUT/vmlinux.tmp ]]; then
	if has_pvh_note "$OUT/vmlinux.tmp"; then
		mv "$OUT/vmlinux.tmp" "$OUT/vmlinux"
	else
		echo "fetch-kernel: the vmlinux in $kpkg has no PVH note (CONFIG_PVH off): bzImage only" >&2
		rm -f "$OUT/vmlinux.tmp"
	fi
fi
echo "$kpkg" > "$OUT/kernel.pkg"
echo "$kver" > "$OUT/kernel.version"
touch "$OUT/.done"
echo "fetch-kernel: $OUT/vmlinuz$([[ -f $OUT/vmlinux ]] && echo " and $OUT/vmlinux (PVH)") from $kpkg" >&2
