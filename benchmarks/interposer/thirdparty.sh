#!/usr/bin/env bash
# thirdparty.sh DIR: checks out, at pinned commits, the third-party user_events
# programs this package's tests and benchmarks run, into DIR (kept between runs:
# nothing is fetched or built twice):
#   DIR/LinuxTracepoints     github.com/microsoft/LinuxTracepoints, built with
#                            cmake in its build directory (libtracepoint and
#                            libeventheader-tracepoint, their samples):
#                            UETRACE_LINUXTRACEPOINTS
#   DIR/LinuxTracepoints-Go  github.com/cataggar/LinuxTracepoints-Go, the Go
#                            port (built by the tests): UETRACE_LINUXTRACEPOINTS_GO
# Needs git, cmake, make and g++ (apt-get install git cmake make g++).
set -euo pipefail
dir="$1"
mkdir -p "$dir"

# checkout URL COMMIT DEST: DEST at COMMIT, fetched alone.
checkout() {
  local url="$1" commit="$2" dest="$3"
  if [ "$(git -C "$dest" rev-parse HEAD 2>/dev/null)" = "$commit" ]; then return; fi
  rm -rf "$dest"
  git init -q "$dest"
  git -C "$dest" fetch -q --depth 1 "$url" "$commit"
  git -C "$dest" checkout -q FETCH_HEAD
}

lt="$dir/LinuxTracepoints"
# v1.4.0 and the build fixes after it (2025-03-17).
checkout https://github.com/microsoft/LinuxTracepoints 9ff8fe86f9a33ac606605ae2510283ef062ddf6a "$lt"
samples=(tracepoint-provider-sample tracepoint-api-sample eventheader-provider-sample eventheader-dynamic-sample)
if ! [ -f "$lt/build/lib/libtracepoint.so" ] || ! (cd "$lt/build/bin" 2>/dev/null && ls "${samples[@]}" >/dev/null 2>&1); then
  cmake -S "$lt" -B "$lt/build" -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$lt/build" -j "$(nproc)" --target tracepoint "${samples[@]}" >/dev/null
fi

checkout https://github.com/cataggar/LinuxTracepoints-Go 6a7190b6db05513e66879ca80f0de6c61b7218d0 "$dir/LinuxTracepoints-Go"
