#!/bin/sh
# build-deps.sh - does this machine have the headers and libraries `make` (the `all` target) needs?
# Cheap: one preprocessor run per header and the compiler's own library search (-print-file-name), no
# link; `make` runs it once per build directory (the stamp $BUILD/.build-deps) before compiling anything,
# so a fresh machine gets one message naming what is missing and what to run, not a compiler error.
#
# Usage: scripts/build-deps.sh CC STATIC [LLHTTP_DIR LLHTTP_INC]   (STATIC=1: brisk is linked statically, as `make`
#        does; LLHTTP_*: where llhttp's C sources and header are, the Makefile's)
# Exit status: 0 when everything is there; 1 after the message (on stderr) otherwise.
CC=${1:-cc}
STATIC=${2:-1}
LLHTTP_DIR=${3:-/usr/share/llhttp}
LLHTTP_INC=${4:-/usr/share/include/llhttp}
missing=""
pkgs=""

need() { # what package
	missing="$missing
  $1 (Debian package $2)"
	case " $pkgs " in *" $2 "*) ;; *) pkgs="$pkgs $2" ;; esac
}

if ! command -v "${CC%% *}" >/dev/null 2>&1; then
	need "the C compiler $CC" gcc
else
	# header:package, for brisk (libc, json-c, libseccomp) and brisk-slirp (libslirp)
	for hp in stdio.h:libc6-dev json-c/json.h:libjson-c-dev seccomp.h:libseccomp-dev \
		slirp/libslirp.h:libslirp-dev; do
		printf '#include <%s>\n' "${hp%%:*}" | $CC -E -x c - -o /dev/null 2>/dev/null || need "${hp%%:*}" "${hp#*:}"
	done
	# llhttp, the API helper's HTTP parser: C sources compiled into brisk (the Makefile's LLHTTP_SRCS)
	for f in "$LLHTTP_DIR/llhttp.c" "$LLHTTP_DIR/api.c" "$LLHTTP_DIR/http.c" "$LLHTTP_INC/llhttp.h"; do
		[ -f "$f" ] || need "$f" node-llhttp
	done
	# libraries: static archives for the static brisk, shared objects for brisk-slirp (always dynamic)
	libs="libslirp.so:libslirp-dev"
	[ "$STATIC" = 1 ] && libs="libc.a:libc6-dev libm.a:libc6-dev libjson-c.a:libjson-c-dev libseccomp.a:libseccomp-dev $libs"
	[ "$STATIC" = 1 ] || libs="libjson-c.so:libjson-c-dev libseccomp.so:libseccomp-dev $libs"
	for lp in $libs; do
		f=$($CC -print-file-name="${lp%%:*}" 2>/dev/null)
		[ -n "$f" ] && [ "$f" != "${lp%%:*}" ] && [ -e "$f" ] || need "${lp%%:*}" "${lp#*:}"
	done
fi
[ -z "$missing" ] && exit 0
cat >&2 <<MSG
make: brisk cannot be built on this machine yet; missing:$missing
Run \`make deps\` (scripts/deps.sh: installs with apt-get every package brisk's build and tests need,
only the missing ones; as root or with sudo), or \`apt-get install$pkgs\`, then \`make\` again.
(\`make demo\` and \`make check\` run \`make deps\` themselves.)
MSG
exit 1
