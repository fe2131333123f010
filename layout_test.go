package uetrace_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The architecture, from the bottom up. A package may import packages of
// lower layers only (tests may import any product package); a new package
// must be placed here, so the picture in docs/architecture.md stays the real one.
var layers = [][]string{
	// The kernel's ctype table, which the parsers above split and name by.
	{"internal/kctype"},
	// The uapi, perf's and Perfetto's formats, the event model, the EventHeader format, who wrote a
	// record, where and when, the shared-memory record ring, other processes'
	// memory and the kernel's news of their forks, execs and exits, a FUSE server, and OTLP.
	{"internal/abi", "internal/caps", "internal/perfring", "internal/report/perfetto",
		"internal/report/perfetto/perfettotest", "internal/shmring", "internal/stamp", "internal/procsyscall", "eventdef", "eventheader", "eventheader/eventheadertest", "eventheader/commonschema", "tracefmt", "perfdata",
		"internal/procmem", "internal/procmem/procmemtest", "internal/procevents", "internal/pidns", "internal/fusefs/fuse", "internal/otlp", "internal/sdaemon", "internal/runguard"},
	// The ftrace ring buffer and its text; the kernel's event filters; user
	// events counted in the kernel by a BPF program.
	{"internal/subsys/ftrace", "internal/subsys/tracefilter", "internal/bpfcount", "internal/daemon/wire"},
	// The user_events subsystem in user space.
	{"internal/subsys", "internal/daemon/client"},
	// The processes calling in through FUSE, as subsys processes: it
	// imports subsys, and the FUSE tree (fusefs) imports it.
	{"internal/fusefs/callers"},
	// The daemon: the subsystem served on a socket; and its tree served
	// through FUSE.
	{"internal/daemon", "internal/fusefs"},
	// What programs import, recording and decoding, and shipping events to
	// OpenTelemetry; and a daemon served in a test's process, for the tests
	// of packages that talk to one.
	{"userevents", "internal/record", "internal/report", "internal/export", "internal/daemon/daemontest"},
	// The live source of export and the Collector's receiver: the kernel
	// or the daemon, through record, as export's samples.
	{"internal/export/live"},
	// EventHeader providers, registering their tracepoints through userevents.
	{"eventheader/ehprovider"},
	// What programs log through, on EventHeader providers: a log/slog
	// handler, and OpenTelemetry's Go Logs SDK.
	{"eventheader/ehslog", "eventheader/ehotel"},
	// The tool.
	{"cmd/uetrace"},
}

// tooling is what checks the product against the real kernel, and the
// benchmarks that run the product's binaries. The product never imports it,
// not even in its tests; it imports the product.
var tooling = [][]string{
	{"kernel/vmtest"},
	{"kernel/cmd/eventgolden", "kernel/cmd/ftracegolden", "kernel/cmd/filtergolden", "kernel/datacalls", "kernel/selftests", "kernel/suites", "conformance/harness", "benchmarks/fusewrite", "benchmarks/soak"},
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
