#!/usr/bin/env bash
# build.sh: build uetrace's test kernel (Linux 6.12 with CONFIG_USER_EVENTS=y)
# from Debian's linux-source-6.12 package.
#
#   kernel/build.sh [options] [OUTPUT]
#
# Unpacks /usr/src/linux-source-6.12.tar.xz into a work directory, runs
# `make tinyconfig`, merges kernel/config.fragment on top with
# scripts/kconfig/merge_config.sh, runs `make olddefconfig`, checks that
# CONFIG_USER_EVENTS=y survived, builds bzImage and copies it to OUTPUT
# (default: kernel/bzImage next to this script).
#
# Options:
#   -w, --workdir DIR   where to unpack and build (default:
#                       $UETRACE_KERNEL_WORKDIR, else
#                       ${XDG_CACHE_HOME:-~/.cache}/uetrace/kernel-build);
#                       an existing tree there is reused (incremental build)
#   -s, --source FILE   the source tarball (default: $UETRACE_KERNEL_SOURCE,
#                       else /usr/src/linux-source-6.12.tar.xz)
#   -j, --jobs N        parallel make jobs (default: nproc)
#       --clean         delete the unpacked tree first and start over
#   -h, --help          this text
#
# Needs (Debian): apt-get install -y linux-source-6.12 build-essential bc \
#   bison flex libelf-dev libssl-dev cpio xz-utils
# About 10 minutes on 2 cores.
set -euo pipefail

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "build.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fragment="$here/config.fragment"
source_tar="${UETRACE_KERNEL_SOURCE:-/usr/src/linux-source-6.12.tar.xz}"
workdir="${UETRACE_KERNEL_WORKDIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uetrace/kernel-build}"
jobs="$(nproc)"
clean=false
output="$here/bzImage"
apt_line="apt-get install -y linux-source-6.12 build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils"

while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workdir) [ $# -ge 2 ] || die "$1 needs an argument"; workdir="$2"; shift 2 ;;
    -s|--source) [ $# -ge 2 ] || die "$1 needs an argument"; source_tar="$2"; shift 2 ;;
    -j|--jobs) [ $# -ge 2 ] || die "$1 needs an argument"; jobs="$2"; shift 2 ;;
    --clean) clean=true; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
if [ $# -gt 1 ]; then die "too many arguments (see --help)"; fi
if [ $# -eq 1 ]; then output="$1"; fi

start=$SECONDS

# --- preflight --------------------------------------------------------------
[ "$(uname -m)" = x86_64 ] || die "this builds an x86_64 kernel natively; run it on an x86_64 host"
[ -f "$fragment" ] || die "config fragment $fragment not found"
if [ ! -f "$source_tar" ]; then
  die "kernel source $source_tar not found; install it with:
  $apt_line"
fi
missing=()
for tool in make gcc ld bc bison flex perl cpio xz tar; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ -f /usr/include/gelf.h ] || missing+=("libelf-dev (gelf.h)")
[ -f /usr/include/openssl/opensslv.h ] || missing+=("libssl-dev (openssl headers)")
if [ ${#missing[@]} -gt 0 ]; then
  die "missing build tools: ${missing[*]}; install them with:
  $apt_line"
fi

# --- unpack -----------------------------------------------------------------
mkdir -p "$workdir"
workdir="$(cd "$workdir" && pwd)"
# The Debian tarball unpacks to linux-source-6.12/.
top="$(tar -tJf "$source_tar" | head -n 1 | cut -d/ -f1)" || true
[ -n "$top" ] || die "cannot read $source_tar"
src="$workdir/$top"
if $clean && [ -d "$src" ]; then
  echo ">> removing $src"
  rm -rf "$src"
fi
if [ -f "$src/Makefile" ] && [ -f "$src/.uetrace-unpacked" ]; then
  echo ">> reusing unpacked source in $src (--clean to start over)"
else
  rm -rf "$src"
  echo ">> unpacking $source_tar into $workdir"
  tar -xJf "$source_tar" -C "$workdir"
  touch "$src/.uetrace-unpacked"
fi
cd "$src"
version="$(make -s kernelversion)"
echo ">> Linux $version in $src"
case "$version" in
  6.12|6.12.*) ;;
  *) echo "build.sh: warning: expected Linux 6.12.x, got $version" >&2 ;;
esac

# --- configure --------------------------------------------------------------
echo ">> make tinyconfig"
make -s tinyconfig >/dev/null
echo ">> merging $fragment"
scripts/kconfig/merge_config.sh -m .config "$fragment" >merge_config.log 2>&1 ||
  { cat merge_config.log >&2; die "merge_config.sh failed"; }
echo ">> make olddefconfig"
make -s olddefconfig

grep -qx 'CONFIG_USER_EVENTS=y' .config ||
  die "CONFIG_USER_EVENTS=y is not in $src/.config after olddefconfig (its dependencies are missing from $fragment?)"

# Every value the fragment asks for should be in the final .config; report
# the ones kconfig dropped (unmet dependencies) without failing on them.
dropped=0
while IFS= read -r line; do
  case "$line" in
    CONFIG_*=*) want="$line" ;;
    "# CONFIG_"*" is not set") want="$line" ;;
    *) continue ;;
  esac
  if ! grep -qxF -- "$want" .config; then
    sym="${want#\# }"; sym="${sym%%[= ]*}"
    got="$(grep -E "^(# )?$sym[= ]" .config || echo "$sym undefined")"
    echo "build.sh: warning: fragment wants '$want', .config has '$got'" >&2
    dropped=$((dropped + 1))
  fi
done <"$fragment"
[ "$dropped" -eq 0 ] || echo "build.sh: warning: $dropped fragment value(s) not in .config" >&2

# --- build ------------------------------------------------------------------
echo ">> make -j$jobs bzImage (about 10 minutes on 2 cores)"
make -j"$jobs" bzImage

mkdir -p "$(dirname "$output")"
cp arch/x86/boot/bzImage "$output"
output="$(cd "$(dirname "$output")" && pwd)/$(basename "$output")"
elapsed=$((SECONDS - start))

cat <<EOF

>> built $output
   Linux $version, config $src/.config
   $(sha256sum "$output" | cut -d' ' -f1)  (sha256)
   took $((elapsed / 60))m$((elapsed % 60))s

Use it for the VM tests (qemu-system-x86 and busybox-static needed):

  UETRACE_KERNEL=$output go test ./...
EOF
