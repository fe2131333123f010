// Package interposer measures C programs writing user_events through the
// interposer (internal/preload) that `uetrace run` preloads, beside the
// Go client's ring write on the same daemon in the same run, so that the
// ratios mean something (BenchmarkInterposer, in this package's tests):
//
//   - testdata/ringbench.c registers the 34-byte event userevents'
//     DaemonRingWrite writes, enables it through the tree and writes it
//     with writev as fast as it can (ring), or at a given rate (paced); it
//     also times the interposer's check on a descriptor that is not the
//     tree's (foreign: write(2) to /dev/null through the interposer, and
//     straight to a stub write beneath it, testdata/stub.c);
//   - testdata/tpbench.c is Microsoft's libtracepoint writing an event of
//     the same size through TPP_FUNCTION (4 iovecs), built against a
//     LinuxTracepoints build ($UETRACE_LINUXTRACEPOINTS: the directory of
//     github.com/microsoft/LinuxTracepoints, configured and built by cmake
//     in its build directory) while `uetrace record` records it.
//
// Each program times itself and prints one line of key=value pairs, which
// Parse reads. It is tooling, never imported by the product: it starts the
// uetrace binary and a daemon, and does not touch the FUSE mount itself.
package interposer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// dir is this package's directory, where testdata is.
func dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Dir(file)
}

// Source is a program's source in testdata.
func Source(name string) string { return filepath.Join(dir(), "testdata", name) }

// Build compiles testdata's programs into dir: ringbench and stub.so, and
// tpbench where lt, a built LinuxTracepoints tree, is given (the error
// says when it cannot be).
func Build(dir, lt string) error {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return fmt.Errorf("building the benchmarks needs gcc: apt-get install gcc libc6-dev (%w)", err)
	}
	builds := [][]string{
		{"-O2", "-Wall", "-Werror", "-o", filepath.Join(dir, "ringbench"), Source("ringbench.c"), "-ldl"},
		{"-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-Wl,-soname,stub.so", "-o", filepath.Join(dir, "stub.so"), Source("stub.c")},
	}
	if lt != "" {
		lib := filepath.Join(lt, "build", "lib")
		if _, err := os.Stat(filepath.Join(lib, "libtracepoint.so")); err != nil {
			return fmt.Errorf("no libtracepoint.so in %s: build LinuxTracepoints with cmake there (cmake -S %s -B %s/build -DBUILD_SHARED_LIBS=ON && make -C %s/build)", lib, lt, lt, lt)
		}
		builds = append(builds, []string{"-O2", "-Wall", "-o", filepath.Join(dir, "tpbench"), Source("tpbench.c"),
			"-I" + filepath.Join(lt, "libtracepoint", "include"), "-L" + lib, "-ltracepoint", "-Wl,-rpath," + lib})
	}
	for _, args := range builds {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("gcc %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// Parse reads a program's line "what key=value ...": its first word and
// its values (numbers) by key.
func Parse(out []byte) (string, map[string]float64, error) {
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", nil, fmt.Errorf("no result line in %q", out)
	}
	v := map[string]float64{}
	what := f[0]
	if _, val, ok := strings.Cut(what, "="); ok { // tpbench: "mode=tpp ..."
		what = val
	}
	for _, kv := range f[1:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return "", nil, fmt.Errorf("%q is not key=value in %q", kv, line)
		}
		n, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return "", nil, fmt.Errorf("%s=%q is not a number", k, val)
		}
		v[k] = n
	}
	return what, v, nil
}
