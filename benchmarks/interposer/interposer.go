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
// Parse reads.
//
// The package also checks that the interposer changes nothing a program
// or a tracer sees (TestThirdPartySameTrace): third-party programs —
// Microsoft's LinuxTracepoints samples, the Go port of LinuxTracepoints
// ($UETRACE_LINUXTRACEPOINTS_GO, a checkout of
// github.com/cataggar/LinuxTracepoints-Go; BuildGoPort builds it) and
// testdata/pyclient.py — run with it and without it on one daemon, and
// their traces, after Normalize, must be the same. thirdparty.sh checks
// out both LinuxTracepoints at pinned commits and builds Microsoft's.
//
// It is tooling, never imported by the product: it starts the uetrace
// binary and a daemon, and does not touch the FUSE mount itself.
package interposer

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// Two runs of one program write the same records but not in the same
// tasks, on the same CPUs or at the same times: Normalize rewrites what
// must differ in a line of the trace file (uetrace trace) or of uetrace
// report's text, and nothing else, so that what is left can be compared
// byte for byte:
//
//   - the task ids (pid, tid, tgid): each run's processes and threads are
//     new ones; each id is replaced by its rank of first appearance in the
//     text (P1, P2, ...), so which record a process, a thread or a forked
//     child wrote is still compared;
//   - the CPU: the scheduler places the writer anywhere, and a record
//     shows the CPU it was written on;
//   - the timestamp: the clock has moved.
//
// Other lines (headers, the events' fields) are left as they are.
func Normalize(text []byte) []byte {
	ids := map[string]int{}
	id := func(s []byte) string {
		n, ok := ids[string(s)]
		if !ok {
			n = len(ids) + 1
			ids[string(s)] = n
		}
		return "P" + strconv.Itoa(n)
	}
	var out []byte
	for line := range bytes.Lines(text) {
		if m := traceContext.FindSubmatch(line); m != nil {
			out = fmt.Appendf(out, "%s-%s", bytes.TrimSpace(m[1]), id(m[2]))
			if len(m[3]) > 0 {
				tgid := m[3]
				if tgid[0] != '-' {
					tgid = []byte(id(tgid))
				}
				out = fmt.Appendf(out, " (%s)", tgid)
			}
			out = fmt.Appendf(out, " [CPU] %s TIME:", m[4])
			out = append(out, line[len(m[0]):]...)
		} else if m := reportContext.FindSubmatch(line); m != nil {
			out = fmt.Appendf(out, "%s %s/%s [CPU] TIME:", bytes.TrimSpace(m[1]), id(m[2]), id(m[3]))
			out = append(out, line[len(m[0]):]...)
		} else {
			out = append(out, line...)
		}
	}
	return out
}

var (
	// traceContext is the start of a line of the trace file, as the
	// kernel's trace_print_context prints it: the task's name and id
	// ("%16s-%-7d"; the name may hold "-" and spaces, so the greedy match
	// takes the last "-id"), with the option record-tgid its tgid
	// (" (%7d)", or " (-------)" when unknown), the CPU (" [%03d] "), the
	// irq and preemption flags and the time ("%5lu.%06lu: ").
	traceContext = regexp.MustCompile(`^(\s*.*)-(\d+)\s+(?:\(\s*(\d+|-+)\)\s+)?\[\d+\]\s+(\S+)\s+\d+\.\d+:`)
	// reportContext is the start of a line of uetrace report's text, as
	// perf script prints it: the task's name, pid/tid, the CPU in
	// brackets and the time.
	reportContext = regexp.MustCompile(`^(\s*.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+\d+\.\d+:`)
)

// GoPort is the Go port of LinuxTracepoints built for a comparison: a
// client program (testdata/goport) and the port's own tests.
type GoPort struct {
	Client string   // testdata/goport built against the port
	Tests  []GoTest // the test binaries of the port's packages
}

// GoTest is a package's test binary and the directory it runs in (its
// package's, as go test runs it).
type GoTest struct {
	Binary, Dir string
}

// BuildGoPort builds, into dir, testdata/goport and the tests of the Go
// port of LinuxTracepoints (github.com/cataggar/LinuxTracepoints-Go,
// checked out at src) — every package but the code generator
// cmd/eventheader-gen, whose tests build Go programs for minutes and
// never open user_events_data. The port's dependency (golang.org/x/sys)
// comes from the module cache or the Go module proxy.
func BuildGoPort(dir, src string) (*GoPort, error) {
	src, err := filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		return nil, fmt.Errorf("no Go module at %s: check out github.com/cataggar/LinuxTracepoints-Go there (%w)", src, err)
	}
	gotool := func(wd string, args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), wd, err, stderr.Bytes())
		}
		return out, nil
	}
	// The client is a module of its own that requires the port where it
	// is checked out.
	mod := filepath.Join(dir, "goport")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return nil, err
	}
	main, err := os.ReadFile(Source("goport/main.go"))
	if err != nil {
		return nil, err
	}
	gomod := fmt.Sprintf("module goport\n\ngo 1.25\n\nrequire github.com/cataggar/LinuxTracepoints-Go v0.0.0\n\nreplace github.com/cataggar/LinuxTracepoints-Go => %s\n", src)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), main, 0o644); err != nil {
		return nil, err
	}
	p := &GoPort{Client: filepath.Join(dir, "goport-client")}
	if _, err := gotool(mod, "build", "-o", p.Client, "."); err != nil {
		return nil, err
	}
	list, err := gotool(src, "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}{{len .XTestGoFiles}}", "./...")
	if err != nil {
		return nil, err
	}
	suite := filepath.Join(dir, "goport-tests")
	var pkgs []string
	for line := range strings.Lines(string(list)) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) != 3 || strings.Contains(f[0], "/cmd/") || f[2] == "00" {
			continue
		}
		pkgs = append(pkgs, f[0])
		// go test -c names a package's binary after its last element.
		p.Tests = append(p.Tests, GoTest{Binary: filepath.Join(suite, f[0][strings.LastIndexByte(f[0], '/')+1:]+".test"), Dir: f[1]})
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages with tests in %s", src)
	}
	if _, err := gotool(src, append([]string{"test", "-c", "-o", suite + "/"}, pkgs...)...); err != nil {
		return nil, err
	}
	return p, nil
}
