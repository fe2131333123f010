package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildTimeout bounds one build: the first go build of a clean cache
// compiles the standard library too.
const buildTimeout = 10 * time.Minute

// BuildC compiles the C source src with gcc and flags into the program out
// ("": src's name less ".c", in tb's temporary directory, which only this
// user may reach) and returns out's path; it skips the test when there is
// no gcc, and fails it, with gcc's words, when src does not build.
func BuildC(tb testing.TB, out, src string, flags ...string) string {
	tb.Helper()
	gcc := NeedGCC(tb)
	if out == "" {
		out = filepath.Join(tb.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := append(append([]string{}, flags...), "-o", out, src)
	if b, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
		tb.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

var built struct {
	once sync.Once
	dir  string // removed by Main
	bin  string
	err  error
}

// Uetrace returns the uetrace command: $UETRACE_BIN when set (the VM runs,
// kernel/suites, pass the static one they built), else cmd/uetrace built
// once for this test binary, the first time a test asks (Run removes it). In the VM
// (UETRACE_IN_VM=1), where there is no go command, a test without
// $UETRACE_BIN is skipped.
func Uetrace(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("UETRACE_BIN"); p != "" {
		return p
	}
	if os.Getenv("UETRACE_IN_VM") == "1" { // kernel/vmtest sets it in the guest
		tb.Skip("no UETRACE_BIN in the VM")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "uetrace-test-bin")
		if built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "uetrace")
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", built.bin, "github.com/uetrace/uetrace/cmd/uetrace").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build ./cmd/uetrace: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.bin
}

// Run runs the tests of m, removes what Uetrace built, and returns their
// exit status: a package whose tests call Uetrace has
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Run(m)) }
func Run(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}
