#!/usr/bin/env bash
# build.sh: build the kernel's own user_events selftests (abi_test, dyn_test,
# ftrace_test, perf_test) and samples/user_events/example as static binaries,
# from Debian's linux-source-6.12 (the source of the test kernel), unmodified.
#
#   kernel/selftests/build.sh [options] OUTDIR
#
# Extracts from the source tarball only what the five programs need:
#   tools/testing/selftests/user_events/      the tests, their Makefile
#   tools/testing/selftests/kselftest.h       the harness they include
#   tools/testing/selftests/kselftest_harness.h
#   samples/user_events/                      the example
#   include/uapi/linux/user_events.h          the ABI, which libc's headers
#                                             (linux-libc-dev) may lack
# into OUTDIR/src, installs the uapi headers the machine's own headers lack
# into OUTDIR/include (as the kernel's headers_install does), and compiles with
# the flags of the selftests' Makefile and lib.mk plus -static, so the
# binaries run in the test VM (or, with --dynamic, without it). The binaries are OUTDIR/abi_test,
# OUTDIR/dyn_test, OUTDIR/ftrace_test, OUTDIR/perf_test and OUTDIR/example.
#
# A second run with the same tarball, compiler and script does nothing
# (OUTDIR/.stamp records them).
#
# Options:
#   -s, --source FILE   the source tarball (default: $UETRACE_KERNEL_SOURCE,
#                       else /usr/src/linux-source-6.12.tar.xz)
#   -d, --dynamic       link against the machine's shared C library instead
#                       (for uetrace run's interposer, which the loader
#                       preloads only into dynamically linked programs)
#   -h, --help          this text
#
# Needs (Debian): apt-get install -y linux-source-6.12 gcc libc6-dev xz-utils
set -euo pipefail

usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "selftests/build.sh: $*" >&2; exit 1; }

source_tar="${UETRACE_KERNEL_SOURCE:-/usr/src/linux-source-6.12.tar.xz}"
apt_line="apt-get install -y linux-source-6.12 gcc libc6-dev xz-utils"

link=-static
while [ $# -gt 0 ]; do
  case "$1" in
    -s|--source) [ $# -ge 2 ] || die "$1 needs an argument"; source_tar="$2"; shift 2 ;;
    -d|--dynamic) link=; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || die "give one OUTDIR (see --help)"
outdir="$1"

tests=(abi_test dyn_test ftrace_test perf_test)
programs=("${tests[@]}" example)
selftests=tools/testing/selftests
members=(
  "$selftests/user_events"
  "$selftests/kselftest.h"
  "$selftests/kselftest_harness.h"
  samples/user_events
  include/uapi/linux/user_events.h
)

# --- preflight --------------------------------------------------------------
if [ ! -f "$source_tar" ]; then
  die "kernel source $source_tar not found; install it with:
  $apt_line"
fi
missing=()
for tool in gcc tar xz sed; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  die "missing tools: ${missing[*]}; install them with:
  $apt_line"
fi
# A static link needs libc.a (libc6-dev), not only the shared libc.
libc_a="$(gcc -print-file-name=libc.a)"
[ -n "$link" ] && [ ! -f "$libc_a" ] && die "gcc finds no libc.a for static linking; install it with:
  $apt_line"

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

# --- up to date? -------------------------------------------------------------
# What the result depends on: the tarball (its path, size and time, not its
# 150 MB of content), the compiler, and this script.
stamp="$(printf '%s\n' \
  "source $(cd "$(dirname "$source_tar")" && pwd)/$(basename "$source_tar") $(stat -L -c '%s %Y' "$source_tar")" \
  "gcc $(gcc -dumpfullversion) $(gcc -dumpmachine) ${link:-dynamic}" \
  "script $(sha256sum "$script" | cut -d' ' -f1)")"
uptodate=true
[ -f "$outdir/.stamp" ] && [ "$(cat "$outdir/.stamp")" = "$stamp" ] || uptodate=false
for p in "${programs[@]}"; do
  [ -x "$outdir/$p" ] || uptodate=false
done
if $uptodate; then
  echo ">> $outdir is up to date"
  exit 0
fi
rm -f "$outdir/.stamp"

# --- extract ----------------------------------------------------------------
# The Debian tarball unpacks to linux-source-6.12/.
top="$(tar -tJf "$source_tar" | head -n 1 | cut -d/ -f1)" || true
[ -n "$top" ] || die "cannot read $source_tar"
src="$outdir/src"
rm -rf "$src"
mkdir -p "$src"
echo ">> extracting the user_events selftests and sample from $source_tar"
tar -xJf "$source_tar" -C "$src" --strip-components=1 "${members[@]/#/$top/}" ||
  die "$source_tar lacks some of: ${members[*]}"

# Every header the programs include by quotes must be there: the harness is
# all they include besides libc's and the uapi's.
for f in "$src/$selftests/user_events/"*.[ch] "$src/$selftests/"kselftest*.h "$src"/samples/user_events/*.c; do
  dir="$(dirname "$f")"
  for inc in $(sed -n 's/^#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    [ -f "$dir/$inc" ] || die "$f includes \"$inc\", which was not extracted"
  done
done

# --- uapi headers -------------------------------------------------------------
# What headers_install does to a uapi header, short of unifdef (checked
# below: none of ours has a __KERNEL__ section).
install_uapi() { # $1 = path under include/uapi, e.g. linux/user_events.h
  local in="$src/include/uapi/$1" out="$outdir/include/$1"
  if grep -q '__KERNEL__' "$in"; then
    die "$in has __KERNEL__ sections, which this script does not strip"
  fi
  mkdir -p "$(dirname "$out")"
  sed -E -e '
	s/([[:space:](])(__user|__force|__iomem)[[:space:]]/\1/g
	s/__attribute_const__([[:space:]]|$)/\1/g
	s@^#include <linux/compiler(|_types).h>@@
	s/(^|[^a-zA-Z0-9])__packed([^a-zA-Z0-9_]|$)/\1__attribute__((packed))\2/g
	s/(^|[[:space:](])(inline|asm|volatile)([[:space:](]|$)/\1__\2__\3/g
	s@#(ifndef|define|endif[[:space:]]*/[*])[[:space:]]*_UAPI@#\1 @
  ' "$in" >"$out.tmp"
  mv "$out.tmp" "$out"
}
rm -rf "$outdir/include"
install_uapi linux/user_events.h

# Any other <linux/...> or <asm/...> header the programs include must come
# from the machine (linux-libc-dev); say which is missing rather than let gcc
# fail on it.
has_header() {
  printf '#include <%s>\n' "$1" | gcc -E -x c -isystem "$outdir/include" -o /dev/null - 2>/dev/null
}
for h in $(cat "$src/$selftests/user_events/"*.[ch] "$src/$selftests/kselftest.h" \
    "$src/$selftests/kselftest_harness.h" "$src"/samples/user_events/*.c "$outdir"/include/linux/*.h |
    sed -n 's/^#[[:space:]]*include[[:space:]]*<\(\(linux\|asm\)\/[^>]*\)>.*/\1/p' | sort -u); do
  has_header "$h" || die "the machine's headers lack <$h>; install them with:
  apt-get install -y linux-libc-dev libc6-dev"
done

# --- compile ----------------------------------------------------------------
# The selftests' Makefile: CFLAGS += -Wl,-no-as-needed -Wall $(KHDR_INCLUDES),
# LDLIBS += -lrt -lpthread -lm; lib.mk adds -D_GNU_SOURCE= and makes
# KHDR_INCLUDES -isystem <installed headers>. The sample's Makefile:
# CFLAGS += -Wl,-no-as-needed -Wall -I<installed headers>.
build() { # $1 = output name, rest = gcc arguments
  local out="$outdir/$1"; shift
  echo ">> gcc $link -o $out"
  gcc $link "$@" -o "$out.tmp" || die "compiling $(basename "$out") failed"
  mv "$out.tmp" "$out"
}
for t in "${tests[@]}"; do
  (cd "$src/$selftests/user_events" &&
    build "$t" -Wl,-no-as-needed -Wall -isystem "$outdir/include" -D_GNU_SOURCE= "$t.c" -lrt -lpthread -lm)
done
(cd "$src/samples/user_events" &&
  build example -Wl,-no-as-needed -Wall -I"$outdir/include" example.c)

printf '%s\n' "$stamp" >"$outdir/.stamp"
echo ">> built ${programs[*]} in $outdir"
