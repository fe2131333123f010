#!/bin/bash
# regen.sh: regenerate eventdef/testdata/kernel-golden.json from
# eventdef/testdata/kernel-cases.txt by running eventgolden inside the
# reference kernel (run-vm). Run from anywhere:
#
#   internal/cmd/eventgolden/regen.sh
#
# UETRACE_KERNEL_DIR is the directory holding run-vm (default ../shared/kernel,
# relative to the repository root). Extra arguments go to run-vm before "--"
# (for example --keep-log /tmp/console.log).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
kdir="${UETRACE_KERNEL_DIR:-../shared/kernel}"
case "$kdir" in /*) ;; *) kdir="$root/$kdir" ;; esac
runvm="$kdir/run-vm"
cases="$root/eventdef/testdata/kernel-cases.txt"
golden="$root/eventdef/testdata/kernel-golden.json"

die() { echo "regen.sh: $*" >&2; exit 1; }
[ -x "$runvm" ] || die "no run-vm at $runvm (set UETRACE_KERNEL_DIR)"
[ -f "$cases" ] || die "no case file $cases"

tmp="$(mktemp -d /tmp/eventgolden.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/vm"
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -o "$tmp/vm/eventgolden" ./internal/cmd/eventgolden) ||
  die "build failed"
cp "$cases" "$tmp/vm/kernel-cases.txt"

start=$(date +%s)
set +e
"$runvm" "$@" --dir "$tmp/vm" -- ./eventgolden -cases kernel-cases.txt > "$tmp/out" 2>&1
rc=$?
set -e
end=$(date +%s)

# Show everything but the base64 payload (the generator's stderr, run-vm's messages).
sed '/^@@EVENTGOLDEN-JSON-BEGIN@@$/,/^@@EVENTGOLDEN-JSON-END /d' "$tmp/out" >&2
[ "$rc" = 0 ] || die "run-vm or eventgolden failed with status $rc"

grep -qx '@@EVENTGOLDEN-JSON-BEGIN@@' "$tmp/out" || die "no JSON begin marker in the VM output"
sum="$(sed -n 's/^@@EVENTGOLDEN-JSON-END \([0-9a-f]\{64\}\)@@$/\1/p' "$tmp/out")"
[ -n "$sum" ] || die "no JSON end marker in the VM output"
sed -n '/^@@EVENTGOLDEN-JSON-BEGIN@@$/,/^@@EVENTGOLDEN-JSON-END /p' "$tmp/out" | sed '1d;$d' |
  base64 -d > "$tmp/golden.json" || die "bad base64 in the VM output"
echo "$sum  $tmp/golden.json" | sha256sum -c --quiet - >/dev/null 2>&1 || die "checksum mismatch: the JSON was corrupted on the console"

mv "$tmp/golden.json" "$golden"
echo "regen.sh: wrote ${golden#"$root"/} ($(wc -c < "$golden") bytes) in $((end - start)) s" >&2
