package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestContainerRecipe follows dist/README.md's recipe for giving a
// container user_events through the host's daemon, with the namespaces a
// container runtime makes (mount, pid, /proc and /run of its own): the
// daemon serves its tree on a directory of the host (serve --mount), the
// container gets it bind-mounted as its /sys/kernel/tracing and the
// daemon's socket in its /run/uetrace. Inside, a C producer writes through
// the tree (benchmarks/fusewrite's: DIAG_IOCSREG, an enable bit in its own
// memory, writev) and uetrace — a Go client — through the socket; the
// host's trace has both.
func TestContainerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedFUSE(t, "mounting FUSE, and namespaces as a container runtime makes them")
	for _, tool := range []string{"unshare", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	work := t.TempDir()
	producer := testutil.BuildC(t, filepath.Join(work, "fusewrite"), "../../benchmarks/fusewrite/testdata/fusewrite.c", "-O2")

	// The host: the daemon, its tree on a directory, and an event the
	// container's Go client will find enabled.
	sockDir := filepath.Join(work, "run")
	os.Mkdir(sockDir, 0o755)
	sock := filepath.Join(sockDir, "uetrace.sock")
	tree := filepath.Join(work, "tracing")
	_, log := background(t, "serve", "--socket", sock, "--mount", tree)
	testutil.Wait(t, "the daemon to serve its tree", func() bool {
		_, err := os.Stat(filepath.Join(tree, "user_events_status"))
		return err == nil && strings.Contains(log.String(), "serving user_events")
	})
	t.Cleanup(func() { exec.Command("umount", "-l", tree).Run() })
	mustCLI(t, sock, "write", "dynamic_events", "u:ctr_go u32 n")
	mustCLI(t, sock, "enable", "ctr_go")

	// The container.
	script := strings.Join([]string{
		"set -e",
		"mount --bind " + tree + " /sys/kernel/tracing",
		"mount -t tmpfs none /run",
		"mkdir /run/uetrace",
		"mount --bind " + sockDir + " /run/uetrace",
		producer + " 10 0",
		testutil.Uetrace(t) + " --backend daemon --socket /run/uetrace/uetrace.sock emit 'ctr_go u32 n' --field n=7",
	}, "\n")
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("the container: %v\n%s\ndaemon:\n%s", err, out, log.String())
	}
	testutil.Wait(t, "both producers' records in the host's trace", func() bool {
		trace := mustCLI(t, sock, "cat", "trace")
		// fusewrite writes 1000 warm-up records, then the 10 asked for.
		return strings.Count(trace, "bench_fuse:") == 1000+10 && strings.Contains(trace, "ctr_go: n=0x7 (7)")
	})
}
