package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// The fuse backend is the kernel backend's driver, unchanged, run where
// TracefsRoot is uetrace's FUSE tree: `uetrace run --private -- ueconform
// -backend fuse ...`. Every step goes through the real kernel ABI —
// open(2) with its mode, DIAG_IOCSREG with a pointer into the driver's
// memory, write(2), pwrite(2) and writev(2) from any address, mprotect of
// the enable page — and the FUSE server (package fusefs) answers it, so
// what the daemon's protocol cannot say (open modes, positions, unmapped
// buffers, read-only enable memory) is said here. What FUSE itself
// answers before the server sees it (a 0-byte write(2) is 0) differs, as
// fusefs's package doc says. perf_event_open is the kernel's, which knows
// nothing of the tree's events: a perf step is "unsupported" on this
// backend (its ID would name some unrelated kernel tracepoint).

// envFUSEInner marks the driver that uetrace run started: it must find the
// tree at TracefsRoot, never start another uetrace run.
const envFUSEInner = "UECONFORM_FUSE_INNER"

// fuseRunLimit bounds a whole run of the fuse backend: the corpus takes
// seconds; a scenario whose waits all run out takes a minute each.
const fuseRunLimit = 30 * time.Minute

// Unavailable says why a backend cannot run on this machine, or nil. The
// fuse backend needs root (uetrace run mounts FUSE, and the scenarios
// register as root does) and /dev/fuse; the others run anywhere, the
// kernel one inside the VM.
func Unavailable(backend string) error {
	if backend != "fuse" {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("the fuse backend needs root: uetrace run mounts FUSE over /sys/kernel/tracing, and the kernel's answers are root's")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("the fuse backend needs /dev/fuse (modprobe fuse): %w", err)
	}
	return nil
}

// onFUSETree reports whether dir is where a uetrace FUSE tree is mounted
// in this process's mount namespace (the last mount there is the visible
// one). It reads the mount table only: nothing of the mount is touched.
func onFUSETree(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	on, want := false, mountEscape.Replace(dir)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[4] != want {
			continue
		}
		on = false
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				on = fields[i+1] == "fuse.uetrace"
				break
			}
		}
	}
	return on, sc.Err()
}

// mountEscape writes a path as mountinfo does: space, tab, newline and
// backslash in octal.
var mountEscape = strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`)

// checkFUSETree is the fuse backend's check before it runs anything: the
// tree must be uetrace's, not the kernel's tracefs.
func checkFUSETree() (inside bool, err error) {
	on, err := onFUSETree(TracefsRoot)
	if err != nil {
		return false, fmt.Errorf("the fuse backend reads the mount table to find uetrace's tree: %w", err)
	}
	if on {
		return true, nil
	}
	if os.Getenv(envFUSEInner) != "" {
		return false, fmt.Errorf("uetrace run started this driver, but %s is not a fuse.uetrace mount here", TracefsRoot)
	}
	return false, nil
}

// runUnderFUSE runs scenarios in a driver of the fuse backend started by
// `uetrace run --private`, and copies its results to w. The scenarios go
// to it as files in a temporary directory, named on its command line in
// their order. This process never touches the tree: it is in another
// mount namespace, and uetrace run, the server, is its child, which the
// deadline kills — aborting the connection, so nothing inside can hang.
func runUnderFUSE(o Options, scenarios []*Scenario, w io.Writer) error {
	if err := Unavailable("fuse"); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ueconform-fuse-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	uetrace := o.Uetrace
	if uetrace == "" {
		uetrace = filepath.Join(tmp, "uetrace")
		if err := vmtest.Build("github.com/uetrace/uetrace/cmd/uetrace", uetrace); err != nil {
			return fmt.Errorf("the fuse backend builds uetrace to serve the tree (or give one with -uetrace): %w", err)
		}
	}
	dir := filepath.Join(tmp, "scenarios")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	args := []string{"run", "--private", "--", o.Self, "-backend", "fuse"}
	for _, sc := range scenarios {
		f := filepath.Join(dir, sc.Name+".scn")
		if err := os.WriteFile(f, []byte(source(sc.Steps)), 0o644); err != nil {
			return err
		}
		args = append(args, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fuseRunLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, args...)
	cmd.Env = append(os.Environ(), envFUSEInner+"=1")
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %v", ctx.Err(), fuseRunLimit)
		}
		return fmt.Errorf("uetrace run --private -- ueconform -backend fuse: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// killGroup makes cmd the leader of a process group of its own, which its
// context's end kills whole: the driver, and under it uetrace run and the
// driver inside.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
}
