package uetrace_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/conformance/harness"
	"github.com/uetrace/uetrace/eventheader/eventheadertest"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/kernel/datacalls"
	"github.com/uetrace/uetrace/kernel/selftests"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// The README is what a newcomer reads first: short, with the two commands
// that must always work on a fresh clone (CI runs the second as it is).
func TestMain(m *testing.M) { os.Exit(testutil.Run(m)) }

func TestREADMELength(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move detail to docs/ and link it", n)
	}
	for _, want := range []string{"```sh\ngo run ./cmd/uetrace demo\n```\n", "```sh\ngo test ./...\n```\n"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks the block\n%s", want)
		}
	}
}

// TestDocsLinks checks that every relative link of README.md and docs/
// names a file or directory of the repository.
func TestDocsLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || target == "" {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which is not there", page, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative links found: the scan is broken (the README links docs/)")
	}
}

// A figure is a count that one of the pages gives, as the words around it
// say it, and what it is computed from.
type figure struct {
	page, text string
}

// TestDocsFigures checks each count the pages give against the files the
// tests that produce it read: a count that changes there must change in
// the page too. Whitespace (line breaks included) matches any whitespace.
func TestDocsFigures(t *testing.T) {
	var figures []figure
	add := func(page, format string, args ...any) {
		figures = append(figures, figure{page, fmt.Sprintf(format, args...)})
	}

	// Conformance: TestConformance fails on any difference from the kernel
	// that known-differences.txt does not list and on any it lists that no
	// longer differs, so the counts ueconform prints are the kernel's
	// results less the listed differences.
	results, err := os.Open(filepath.Join("conformance", "kernel.results"))
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := harness.ParseResults(results)
	results.Close()
	if err != nil {
		t.Fatal(err)
	}
	scenarios, _ := filepath.Glob(filepath.Join("conformance", "scenarios", "*.scn"))
	if len(scenarios) != len(kernel.Names) {
		t.Fatalf("conformance/scenarios has %d scenarios, kernel.results %d: go test ./conformance/harness -update", len(scenarios), len(kernel.Names))
	}
	known, err := harness.LoadKnown(filepath.Join("conformance", "known-differences.txt"))
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]*harness.Results{}
	for _, b := range harness.Backends[1:] {
		res := &harness.Results{Names: kernel.Names, Text: map[string]string{}}
		for _, name := range kernel.Names {
			res.Text[name] = kernel.Text[name]
			if _, differs := known[name][b]; differs {
				res.Text[name] += "(a known difference)\n"
			}
		}
		backends[b] = res
	}
	add("docs/testing.md", "%d scenarios (`conformance/scenarios/*.scn`", len(kernel.Names))
	add("docs/testing.md", "%s", harness.Compare(kernel, backends, known).Summary())

	// The kernel's selftests through FUSE: TestSelftestsThroughFUSE
	// requires every test of each program to pass.
	var passing []string
	for _, b := range selftests.Binaries {
		passing = append(passing, fmt.Sprintf("`%s` %d/%d", b.Name, len(b.Tests), len(b.Tests)))
	}
	add("docs/run-and-fuse.md", "unmodified: %s and `samples/user_events/example`", strings.Join(passing, ", "))

	// kernel/datacalls through FUSE: TestThroughFUSE requires every row of
	// the golden but those fuse.differences lists.
	rows, err := datacalls.ReadGolden()
	if err != nil {
		t.Fatal(err)
	}
	differences, err := os.ReadFile(filepath.Join("kernel", "datacalls", "testdata", "fuse.differences"))
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for _, line := range strings.Split(string(differences), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			differ++
		}
	}
	add("docs/run-and-fuse.md", "%d of the %d calls of `kernel/datacalls` answer as Linux 6.12 does; the %d others", len(rows)-differ, len(rows), differ)

	// The EventHeader vectors: TestGoldenDecode and TestGoldenReencode
	// require every one of them.
	n := eventheadertest.Count
	add("docs/testing.md", "`eventheader/eventheadertest` holds %d events", n)
	add("docs/testing.md", "(`TestGoldenReencode`): %d/%d and %d/%d.", n, n, n, n)
	add("docs/record-report.md", "The %d events of Microsoft's test suite report exactly as their decoder prints them", n)
	add("docs/architecture.md", "proved on the reference's %d events", n)

	// The Collector the export tests run.
	gomod, err := os.ReadFile(filepath.Join("otelcol", "distribution", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	otelcol := regexp.MustCompile(`(?m)^\s*go\.opentelemetry\.io/collector/otelcol (v\S+)$`).FindSubmatch(gomod)
	if otelcol == nil {
		t.Fatal("otelcol/distribution/go.mod requires no go.opentelemetry.io/collector/otelcol")
	}
	add("docs/record-report.md", "(otelcol %s with the OTLP receiver", otelcol[1])

	space := regexp.MustCompile(`\s+`)
	for _, f := range figures {
		text, err := os.ReadFile(f.page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(space.ReplaceAllString(string(text), " "), f.text) {
			t.Errorf("%s does not say %q: the figure there is stale", f.page, f.text)
		}
	}
}

// readmeC compiles the README's C program (static, for the VM) and
// returns it and the trace line the README shows for it.
func readmeC(t *testing.T, static bool) (bin string, shown []byte) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src := regexp.MustCompile("(?ms)^```c\n(.*?)^```$").FindSubmatch(readme)
	shown = helloLine.Find(readme)
	if src == nil || shown == nil {
		t.Fatal("README.md has no ```c block, or no trace line of its event hello")
	}
	if !helloShape.Match(shown) {
		t.Fatalf("README.md shows the trace line\n%s\nwhich is not like the kernel's %s", shown, helloShape)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.c"), src[1], 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"-Wall", "-Werror"}
	if static {
		flags = append(flags, "-static") // libc6-dev has libc.a
	}
	return testutil.BuildC(t, "", filepath.Join(dir, "hello.c"), flags...), shown
}

var (
	// helloLine finds a trace line of the README's C program's event.
	helloLine = regexp.MustCompile("(?m)^ +hello-[0-9]+ .*: hello: count=.*$")
	// helloShape is such a line as the kernel writes it for a u32 field:
	// comm-pid, [cpu], the latency flags (".N..." when the kernel wants to
	// reschedule the writer), the time, the event and "name=0xhex
	// (decimal)".
	helloShape = regexp.MustCompile(`^ +hello-\d+ +\[\d{3}\] [.a-zA-Z0-9]{5} +\d+\.\d{6}: hello: count=0x[0-9a-f]+ \(\d+\)$`)
)

// TestREADMECProgram compiles the README's C program (this machine is the
// Debian 12 whose headers have no <linux/user_events.h>) and runs it as the
// README says — a daemon, the program under uetrace run, its event
// enabled — until its record is in the trace, shown as the README shows it.
func TestREADMECProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs uetrace")
	}
	testutil.NeedFUSE(t, "uetrace run mounts FUSE")
	hello, _ := readmeC(t, false)
	r := startREADME(t, filepath.Dir(hello))
	r.start("run", "--", "./hello")
	r.until(regexp.MustCompile(`(?m)^hello +user_events`), "status")
	r.until(regexp.MustCompile(`(?m)^enabled user_events:hello$`), "enable", "hello")
	if got := r.until(helloLine, "trace"); !helloShape.Match(got) {
		t.Errorf("the trace shows\n%s\nwant a line like the README's, %s", got, helloShape)
	}
}

// TestREADMEGoProgram builds the README's Go quick start as the README
// says — its block as main's body — and runs it on a daemon as the README
// does, until its record is in the trace. The block once wrote one record
// and returned: by the time `uetrace enable myapp_request` ran, the event
// was gone with its last registration (Linux's auto-delete of an event
// nothing holds), and the README's commands failed with ENOENT.
func TestREADMEGoProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs uetrace")
	}
	if fd, err := syscall.Open("/sys/kernel/tracing/user_events_data", syscall.O_WRONLY|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Close(fd)
		t.Skip("this kernel has user_events and this user may write them: the README's program, opening the kernel's first, would trace on this machine's kernel")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ```go block")
	}
	// The imports the README names, and the block as main's body; built
	// in this module by an overlay, as if it were a package of its own.
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"log\"\n\t\"time\"\n\n\t\"github.com/uetrace/uetrace/userevents\"\n)\n\nfunc main() {\n" +
		string(block[1]) + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	overlay := fmt.Sprintf(`{"Replace":{%q:%q}}`, filepath.Join(wd, "readmego", "main.go"), filepath.Join(dir, "main.go"))
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", filepath.Join(dir, "myapp"), "./readmego").CombinedOutput(); err != nil {
		t.Fatalf("the README's Go block as main's body does not build: %v\n%s\n%s", err, out, src)
	}
	r := startREADME(t, dir)
	r.start(filepath.Join(dir, "myapp"))
	r.until(regexp.MustCompile(`(?m)^myapp_request +user_events`), "status")
	r.until(regexp.MustCompile(`(?m)^enabled user_events:myapp_request$`), "enable", "myapp_request")
	r.until(regexp.MustCompile(`(?m)^ +myapp-\d+ .*: myapp_request: status=0xc8 \(200\) path=/index\.html$`), "trace")
}

// readmeRun is a daemon started as the README starts it, on a socket of
// its own in dir, and the commands the README runs beside it.
type readmeRun struct {
	t   *testing.T
	ctx context.Context
	bin string
	env []string
	dir string
}

// startREADME starts `uetrace serve` on a socket in dir, stopped at the
// end of the test, and waits until it answers.
func startREADME(t *testing.T, dir string) *readmeRun {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r := &readmeRun{t: t, ctx: ctx, bin: testutil.Uetrace(t), dir: dir,
		env: append(os.Environ(), "UETRACE_SOCKET="+filepath.Join(dir, "uetrace.sock"))}
	r.start("serve")
	r.until(regexp.MustCompile(`(?m)^EVENT`), "status")
	return r
}

// start starts uetrace with args (or, when args[0] is a path, that
// program) in the background; it is stopped by SIGTERM at the end of the
// test, its output logged if the test failed.
func (r *readmeRun) start(args ...string) {
	name := r.bin
	if filepath.IsAbs(args[0]) {
		name, args = args[0], args[1:]
	}
	cmd := exec.CommandContext(r.ctx, name, args...)
	cmd.Env, cmd.Dir = r.env, r.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if r.t.Failed() {
			r.t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), &out)
		}
	})
}

// until runs uetrace with args, on the daemon even where the kernel has
// user_events, until it succeeds and its output has a line like want, and
// returns that line.
func (r *readmeRun) until(want *regexp.Regexp, args ...string) []byte {
	r.t.Helper()
	for r.ctx.Err() == nil {
		cmd := exec.CommandContext(r.ctx, r.bin, append([]string{"--backend", "daemon"}, args...)...)
		cmd.Env = r.env
		out, err := cmd.CombinedOutput()
		if err == nil {
			if line := want.Find(out); line != nil {
				return line
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("uetrace %s: no line like %s in time", strings.Join(args, " "), want)
	return nil
}

// TestREADMECProgramOnKernel runs the README's C program, built static, on
// the real Linux 6.12 with user_events (kernel/vmtest): the uapi it
// declares by hand must be the kernel's, and its record must show in the
// kernel's trace as the README shows it.
func TestREADMECProgramOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin, _ := readmeC(t, true)
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{Files: map[string]string{"hello": bin}}, "sh", "-c", `
		cd /sys/kernel/tracing
		/test/hello &
		until [ -e events/user_events/hello/enable ]; do sleep 0.1; done
		echo 1 > events/user_events/hello/enable
		until grep -q ': hello: count=' trace; do sleep 0.1; done
		grep ': hello: count=' trace | head -1
		kill $!`)
	if err != nil {
		t.Fatal(err)
	}
	got := helloLine.Find(res.Output)
	if res.ExitCode != 0 || got == nil {
		t.Fatalf("exit %d, no record of hello in the kernel's trace:\n%s", res.ExitCode, res.Output)
	}
	if !helloShape.Match(got) {
		t.Errorf("the kernel's trace shows\n%s\nwant a line like the README's, %s", got, helloShape)
	}
}
