#!/bin/bash
# regen.sh: regenerate internal/ftrace/testdata/kernel-ftrace.json by running
# the capture program inside the reference kernel (run-vm). Run from anywhere:
#
#   internal/ftrace/internal/capture/regen.sh
#
# UETRACE_KERNEL_DIR is the directory holding run-vm (default ../shared/kernel,
# relative to the repository root). Extra arguments go to run-vm before "--".
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
kdir="${UETRACE_KERNEL_DIR:-../shared/kernel}"
case "$kdir" in /*) ;; *) kdir="$root/$kdir" ;; esac
runvm="$kdir/run-vm"
golden="$root/internal/ftrace/testdata/kernel-ftrace.json"

die() { echo "regen.sh: $*" >&2; exit 1; }
[ -x "$runvm" ] || die "no run-vm at $runvm (set UETRACE_KERNEL_DIR)"

tmp="$(mktemp -d /tmp/ftcapture.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/vm"
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -o "$tmp/vm/ftcapture" ./internal/ftrace/internal/capture) ||
  die "build failed"

start=$(date +%s)
set +e
"$runvm" "$@" --dir "$tmp/vm" -- ./ftcapture > "$tmp/out" 2>&1
rc=$?
set -e
end=$(date +%s)

sed '/^@@FTCAPTURE-JSON-BEGIN@@$/,/^@@FTCAPTURE-JSON-END /d' "$tmp/out" >&2
[ "$rc" = 0 ] || die "run-vm or capture failed with status $rc"

grep -qx '@@FTCAPTURE-JSON-BEGIN@@' "$tmp/out" || die "no JSON begin marker in the VM output"
sum="$(sed -n 's/^@@FTCAPTURE-JSON-END \([0-9a-f]\{64\}\)@@$/\1/p' "$tmp/out")"
[ -n "$sum" ] || die "no JSON end marker in the VM output"
sed -n '/^@@FTCAPTURE-JSON-BEGIN@@$/,/^@@FTCAPTURE-JSON-END /p' "$tmp/out" | sed '1d;$d' |
  base64 -d > "$tmp/golden.json" || die "bad base64 in the VM output"
echo "$sum  $tmp/golden.json" | sha256sum -c --quiet - >/dev/null 2>&1 || die "checksum mismatch: the JSON was corrupted on the console"

mkdir -p "$(dirname "$golden")"
mv "$tmp/golden.json" "$golden"
echo "regen.sh: wrote ${golden#"$root"/} ($(wc -c < "$golden") bytes) in $((end - start)) s" >&2
