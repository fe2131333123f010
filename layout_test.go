package uetrace_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The architecture, from the bottom up. A package may import packages of
// lower layers only (tests may import any product package); a new package
// must be placed here, so the picture in docs/architecture.md stays the real one.
var layers = [][]string{
	// The kernel's ctype table, which the parsers above split and name by;
	// the files of /proc and /sys, read and parsed; what tests share
	// (TestTestutilForTestsOnly); every thread of the process real-time.
	{"internal/kctype", "internal/procfs", "internal/testutil", "internal/realtime"},
	// The uapi, Perfetto's format, the event model, the tracefs format files, the EventHeader
	// format, who wrote a record, where and when, the shared-memory record ring, other processes'
	// memory and the kernel's news of their forks, execs and exits, a FUSE server, and OTLP;
	// the interposer preloaded into other programs (C, embedded) and its builder.
	{"internal/preload", "internal/preload/build", "internal/abi", "internal/caps", "internal/perfring", "internal/report/perfetto",
		"internal/report/perfetto/perfettotest", "internal/shmring", "internal/shmring/shmringtest", "internal/stamp", "eventdef", "eventheader", "eventheader/eventheadertest", "eventheader/commonschema", "tracefmt",
		"internal/procmem", "internal/procmem/procmemtest", "internal/procevents", "internal/pidns", "internal/fusefs/fuse", "internal/otlp", "internal/sdaemon"},
	// The daemon's protocol; the ftrace ring buffer and its text; the kernel's event filters; user
	// events counted in the kernel by a BPF program; perf.data files, and their sessions (events by
	// their formats, EventHeader's among them); the events export's tests map.
	{"internal/daemon/wire", "internal/subsys/ftrace", "internal/subsys/tracefilter", "internal/bpfcount", "perfdata",
		"internal/export/exporttest"},
	// The daemon's client; the user_events subsystem in user space; a perf
	// event of its tracepoints; the checks of who wrote a ring's record.
	{"internal/daemon/client", "internal/subsys", "internal/perfevent", "internal/ringcheck"},
	// The errors of the public packages; the processes calling in through
	// FUSE, as subsys processes; uetrace run's seccomp guard; a session's
	// reader of a ring set the daemon handed over.
	{"internal/uerror", "internal/fusefs/callers", "internal/runguard", "internal/handover"},
	// The kernel's tracefs found; the daemon: the subsystem served on a
	// socket; and its tree served through FUSE.
	{"internal/kernelfs", "internal/daemon", "internal/fusefs"},
	// What programs import to emit events: the kernel's user_events or the
	// daemon's, through the client — no server, trace buffer or filter.
	{"userevents"},
	// The tracefs tree of the same backends; EventHeader providers on
	// userevents.
	{"tracefs", "eventheader/ehprovider"},
	// User_events in this process; recording and decoding, and shipping
	// events to OpenTelemetry; a daemon served in a test's process; what
	// programs log through, on EventHeader providers: a log/slog handler,
	// and OpenTelemetry's Go SDKs.
	{"internal/inproc", "internal/record", "internal/report", "internal/export", "internal/daemon/daemontest",
		"eventheader/ehslog", "eventheader/ehotel"},
	// The in-process kernel for tests and demos; the live source of export
	// and the Collector's receiver: the kernel or the daemon, through
	// record, as perfdata's samples.
	{"userevents/usereventstest", "internal/export/live"},
	// The tool.
	{"cmd/uetrace"},
}

// tooling is what checks the product against the real kernel, and the
// benchmarks that run the product's binaries. The product never imports it,
// not even in its tests; it imports the product.
var tooling = [][]string{
	{"kernel/vmtest"},
	{"kernel/cmd/eventgolden", "kernel/cmd/ftracegolden", "kernel/cmd/filtergolden", "kernel/cmd/tracefsgolden", "kernel/datacalls", "kernel/selftests", "kernel/suites", "conformance/harness", "benchmarks/fusewrite", "benchmarks/interposer", "benchmarks/soak"},
	{"conformance/cmd/ueconform"},
}

const module = "github.com/uetrace/uetrace"

type listedPackage struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listedPackage
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// ours returns the module's packages among imports, relative to the module.
func ours(imports []string) []string {
	var rel []string
	for _, imp := range imports {
		if r, ok := strings.CutPrefix(imp, module+"/"); ok {
			rel = append(rel, r)
		}
	}
	return rel
}

func isTooling(pkg string) bool {
	return strings.HasPrefix(pkg, "kernel/") || strings.HasPrefix(pkg, "conformance/") || strings.HasPrefix(pkg, "benchmarks/")
}

// TestLayout checks that imports point down only and that nothing outside
// kernel/, conformance/ and benchmarks/ imports the tooling, tests included.
func TestLayout(t *testing.T) {
	level := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			level[p] = i
		}
	}
	for i, l := range tooling {
		for _, p := range l {
			if !isTooling(p) {
				t.Fatalf("tooling package %s is not under kernel/, conformance/ or benchmarks/", p)
			}
			level[p] = len(layers) + i
		}
	}
	pkgs := listPackages(t)
	for _, p := range pkgs {
		if p.ImportPath == "" { // this test's own package, the module root
			continue
		}
		lv, known := level[p.ImportPath]
		if !known {
			t.Errorf("package %s is in no layer: add it to layers or tooling in layout_test.go (and to the picture in docs/architecture.md)", p.ImportPath)
			continue
		}
		for _, imp := range ours(p.Imports) {
			il, ok := level[imp]
			if ok && il >= lv {
				t.Errorf("%s imports %s, which is not below it", p.ImportPath, imp)
			}
		}
		if isTooling(p.ImportPath) {
			continue
		}
		for _, imp := range ours(slices.Concat(p.Imports, p.TestImports, p.XTestImports)) {
			if isTooling(imp) {
				t.Errorf("%s imports the kernel-oracle tooling %s: the product must not depend on it, not even in tests", p.ImportPath, imp)
			}
		}
	}
}

// TestTestutilForTestsOnly: internal/testutil is for tests — their
// _test.go files, the test-helper packages (named …test, as httptest) and
// the tooling — never for what ships.
func TestTestutilForTestsOnly(t *testing.T) {
	for _, p := range listPackages(t) {
		if isTooling(p.ImportPath) || strings.HasSuffix(p.ImportPath, "test") {
			continue
		}
		if slices.Contains(ours(p.Imports), "internal/testutil") {
			t.Errorf("%s imports internal/testutil outside its tests: it is for tests only", p.ImportPath)
		}
	}
}

// producers are the packages a program imports to emit events; what they
// link is bounded by TestProducerImports.
var producers = []string{"userevents", "eventheader/ehprovider", "eventheader/ehslog", "eventheader/ehotel"}

// notForProducers are what a producer must not link: the server, the
// trace buffer, the filter engine, FUSE, the tools' machinery — and two of
// the standard library's that would make every producer a cgo program
// (os/user) or carry a cryptography library for eight random bytes
// (crypto/...).
func notForProducers(pkg string) bool {
	switch {
	case pkg == "internal/daemon/wire" || pkg == "internal/daemon/client":
		return false
	case pkg == "os/user" || strings.HasPrefix(pkg, "crypto/") || pkg == "crypto":
		return true
	}
	for _, p := range []string{"internal/subsys", "internal/daemon", "internal/fusefs", "internal/record", "internal/report",
		"internal/export", "internal/inproc", "tracefs", "internal/bpfcount", "internal/otlp", "internal/runguard"} {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// TestProducerImports: a program that emits events links the producer API
// and what reaches the kernel or the daemon — never the kernel model, the
// trace buffer, the filter engine or the server (go list -deps).
func TestProducerImports(t *testing.T) {
	for _, prod := range producers {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", module+"/"+prod).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", prod, err)
		}
		importer := map[string]string{}
		var deps []string
		for line := range strings.Lines(string(out)) {
			p, imps, _ := strings.Cut(strings.TrimSpace(line), ":")
			p = strings.TrimPrefix(p, module+"/")
			deps = append(deps, p)
			for _, imp := range strings.Fields(imps) {
				importer[strings.TrimPrefix(imp, module+"/")] = p
			}
		}
		ours := func(p string) bool {
			return slices.ContainsFunc(layers, func(l []string) bool { return slices.Contains(l, p) })
		}
		for _, d := range deps {
			// The standard library's by uetrace's own packages only: an SDK
			// a producer chose (OpenTelemetry's) brings what it brings.
			if notForProducers(d) && (ours(d) || ours(importer[d])) {
				t.Errorf("%s links %s (imported by %s): a program that emits events must not", prod, d, importer[d])
			}
		}
	}
}

// TestProducerBinarySize: a program that registers one event and writes
// it is at most 1.2 times a hello world that imports only x/sys — what a
// library that links only its producer's side costs. Both are built here
// with this toolchain's defaults (testdata/hello); the typed API's hello
// (Define1) is reported beside them.
func TestProducerBinarySize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three programs")
	}
	dir := t.TempDir()
	size := func(name string) int64 {
		bin := filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/hello/"+name).CombinedOutput(); err != nil {
			t.Fatalf("go build ./testdata/hello/%s: %v\n%s", name, err, out)
		}
		st, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	xsys, event, typed := size("xsys"), size("event"), size("typed")
	t.Logf("hello world (x/sys): %d bytes; hello event (Register, Write): %d bytes, %.3f×; typed hello event (Define1): %d bytes, %.3f×",
		xsys, event, float64(event)/float64(xsys), typed, float64(typed)/float64(xsys))
	if float64(event) > 1.2*float64(xsys) {
		t.Errorf("the hello event is %d bytes, %.3f× the hello world's %d: over 1.2× — see TestProducerImports and go build -ldflags=-dumpdep for what it links",
			event, float64(event)/float64(xsys), xsys)
	}
}
