// Package vmtest runs programs inside a real Linux kernel, booted under qemu,
// and hands back their output and exit status: the way uetrace's tests reach
// a kernel that has CONFIG_USER_EVENTS=y when the machine they run on has not.
//
// A run packs the program and its files into an initramfs (a cpio archive
// written here, with busybox for a shell), boots the kernel with it, runs the
// command as root in /test with tracefs mounted at /sys/kernel/tracing, and
// collects the command's stdout and stderr from a second serial port set to
// raw mode, so what comes back is byte for byte what the program wrote; the
// first serial port is the console, where the init script reports the exit
// status.
//
// The kernel image comes from $UETRACE_KERNEL, else from ../shared/kernel/bzImage
// beside the repository. Tests call [Require], which skips with instructions
// when there is no image, no qemu or no static busybox — unless
// UETRACE_VMTEST=require (CI sets it), where a missing piece is a failure.
// kernel/README.md says how to build the image from Debian's linux-source-6.12.
//
// Programs run inside must be static: build Go with CGO_ENABLED=0 ([Build],
// [BuildTest] do).
package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Options describe one run.
type Options struct {
	// Kernel is the bzImage to boot ("": [Kernel]).
	Kernel string
	// Files are copied into the guest's /test directory: guest name (a
	// path relative to /test) → host path. Executables keep their mode.
	Files map[string]string
	// Env is added to the command's environment (KEY=value).
	Env []string
	// Timeout kills the guest (0: 30 minutes). It is a guard against a
	// guest that hangs, not a measure of speed: TCG emulation on a loaded
	// machine is many times slower than on a quiet one.
	Timeout time.Duration
	// MemMB is the guest's memory (0: 1024). CPUs is its CPU count (0: 2).
	MemMB, CPUs int
	// VirtualClock makes the guest's clocks count the instructions its
	// CPUs run (qemu's -icount shift=0,sleep=off, on one emulation
	// thread): 1 ns an instruction, idle time skipped. Time in the guest
	// then stands still while the host does not run it, so a busy host
	// cannot put a gap between two of the guest's steps that its program
	// did not make — what a test of the kernel's timestamps (the ring
	// buffer's time extends) needs. It is faster too when the guest
	// sleeps, as sleeping takes no host time.
	VirtualClock bool
	// Console, if set, receives the guest's console: kernel messages and
	// the init script's markers, for debugging a guest that does not boot.
	Console io.Writer
}

// Result is what the command did.
type Result struct {
	Output   []byte // its stdout and stderr, interleaved as written
	ExitCode int
	Elapsed  time.Duration // from qemu's start to its exit
}

// EnvInVM is set to 1 in the environment of every command run in a guest, so
// a test binary can tell it is the inside of a run.
const EnvInVM = "UETRACE_IN_VM"

// EnvKernel names the kernel image; EnvRequire=require makes [Require] fail
// instead of skip.
const (
	EnvKernel  = "UETRACE_KERNEL"
	EnvRequire = "UETRACE_VMTEST"
)

// InVM reports whether this process runs inside a guest started by [Run].
func InVM() bool { return os.Getenv(EnvInVM) == "1" }

// HowToGetKernel is the advice a skipped test prints.
const HowToGetKernel = "no kernel with user_events to boot: set " + EnvKernel +
	"=/path/to/bzImage, or build one with kernel/build.sh (Debian's linux-source-6.12; see kernel/README.md)"

// Kernel returns the image to boot: $UETRACE_KERNEL, else
// ../shared/kernel/bzImage next to the repository root, if it exists.
func Kernel() (string, error) {
	if k := os.Getenv(EnvKernel); k != "" {
		if _, err := os.Stat(k); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvKernel, k, err)
		}
		return k, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	k := filepath.Join(filepath.Dir(root), "shared", "kernel", "bzImage")
	if _, err := os.Stat(k); err != nil {
		return "", errors.New(HowToGetKernel)
	}
	return k, nil
}

// repoRoot is the directory holding the module's go.mod, found upwards
// from the working directory (go test runs in the package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vmtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Available reports why runs cannot happen here, or nil when they can: the
// kernel image, qemu-system-x86_64 and a static busybox must all exist.
func Available() error {
	if _, err := Kernel(); err != nil {
		return err
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return errors.New("qemu-system-x86_64 not found: apt-get install -y --no-install-recommends qemu-system-x86 busybox-static")
	}
	if _, err := busybox(); err != nil {
		return err
	}
	return nil
}

// Require skips the test when runs cannot happen here, saying what is
// missing and how to get it; with UETRACE_VMTEST=require it fails instead.
// Inside a guest it skips too: a test that boots a VM must not recurse.
func Require(t testing.TB) {
	t.Helper()
	if InVM() {
		t.Skip("already inside the VM")
	}
	if RaceEnabled {
		t.Skip("VM tests run without -race: what they boot is built without it")
	}
	if err := Available(); err != nil {
		if os.Getenv(EnvRequire) == "require" {
			t.Fatalf("%v (%s=require)", err, EnvRequire)
		}
		t.Skip(err)
	}
}

// busybox finds a statically linked busybox: the guest has no libc.
func busybox() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("busybox"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/bin/busybox", "/usr/bin/busybox")
	for _, p := range candidates {
		if isStatic(p) {
			return p, nil
		}
	}
	return "", errors.New("no static busybox found: apt-get install -y busybox-static")
}

// isStatic reports whether path is an ELF executable with no interpreter.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// Build compiles a main package into a static binary at out.
func Build(pkg, out string) error {
	return goTool("build", "-trimpath", "-o", out, pkg)
}

// BuildTest compiles a package's tests into a static binary at out.
func BuildTest(pkg, out string) error {
	return goTool("test", "-c", "-trimpath", "-o", out, pkg)
}

func goTool(args ...string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// The init script's markers on the console.
var exitMarker = regexp.MustCompile(`@@VMTEST-EXIT (\d+)@@`)

const beginMarker = "@@VMTEST-BEGIN@@"

// initScript mounts what user_events tests need, runs the command with its
// output on the raw second serial port, and powers off.
const initScript = `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
ln -s /proc/self/fd /dev/fd 2>/dev/null
echo 0 > /proc/sys/kernel/printk 2>/dev/null
stty -F /dev/ttyS1 raw -echo 2>/dev/null
export HOME=/root PATH=/test:/bin:/sbin TMPDIR=/tmp ` + EnvInVM + `=1
. /etc/env
cd /test
echo "` + beginMarker + `"
sh /etc/cmd </dev/null >/dev/ttyS1 2>&1
rc=$?
echo "@@VMTEST-EXIT $rc@@"
sync
reboot -f
`

// Run boots the kernel with opts' files and runs cmd in the guest's /test
// directory. An error means the run itself failed (no qemu, the guest did
// not boot or timed out); the command's own failure is Result.ExitCode.
func Run(ctx context.Context, opts Options, cmd ...string) (*Result, error) {
	if len(cmd) == 0 {
		return nil, errors.New("vmtest: no command")
	}
	kernel := opts.Kernel
	if kernel == "" {
		k, err := Kernel()
		if err != nil {
			return nil, err
		}
		kernel = k
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errors.New("qemu-system-x86_64 not found: apt-get install -y --no-install-recommends qemu-system-x86")
	}
	bb, err := busybox()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "vmtest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	initrd := filepath.Join(work, "initramfs.cpio")
	if err := writeInitramfs(initrd, bb, opts, cmd); err != nil {
		return nil, err
	}
	outPath := filepath.Join(work, "output")

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mem, cpus := opts.MemMB, opts.CPUs
	if mem == 0 {
		mem = 1024
	}
	if cpus == 0 {
		cpus = 2
	}
	// Software emulation: a nested /dev/kvm may be one that hangs this
	// guest, and TCG boots everywhere in about 3 seconds.
	accel := []string{"-accel", "tcg,thread=multi"}
	if opts.VirtualClock {
		// icount needs TCG's single thread for all CPUs.
		accel = []string{"-accel", "tcg,thread=single", "-icount", "shift=0,sleep=off"}
	}
	var (
		console bytes.Buffer
		runErr  error
		start   = time.Now()
	)
	// A guest that dies before its init says it begins the command — a
	// boot that failed (an early panic, which quiet and panic=-1 make a
	// silent exit): seen now and then on a loaded machine. The command has
	// not run, so booting again changes nothing of what it tests.
	for boot := 1; ; boot++ {
		console.Reset()
		os.Remove(outPath)
		q := exec.CommandContext(ctx, qemu, append(accel, "-cpu", "max",
			"-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
			"-nographic", "-no-reboot", "-monitor", "none", "-display", "none",
			"-serial", "stdio", "-serial", "file:"+outPath,
			"-kernel", kernel, "-initrd", initrd,
			"-append", "console=ttyS0 quiet loglevel=0 panic=-1 tsc=reliable")...)
		var w io.Writer = &console
		if opts.Console != nil {
			w = io.MultiWriter(&console, opts.Console)
		}
		q.Stdout, q.Stderr = w, w
		q.WaitDelay = 5 * time.Second
		runErr = q.Run()
		if boot == 3 || ctx.Err() != nil || bytes.Contains(console.Bytes(), []byte(beginMarker)) {
			break
		}
	}
	elapsed := time.Since(start)

	out, _ := os.ReadFile(outPath)
	m := exitMarker.FindSubmatch(console.Bytes())
	if m == nil {
		tail := lastLines(console.String(), 20)
		if ctx.Err() != nil {
			return &Result{Output: out, ExitCode: -1, Elapsed: elapsed},
				fmt.Errorf("vmtest: guest stopped after %v (the run's timeout is %v; the caller's context: %v); console:\n%s",
					elapsed.Round(time.Second), timeout, context.Cause(ctx), tail)
		}
		if !bytes.Contains(console.Bytes(), []byte(beginMarker)) {
			return &Result{Output: out, ExitCode: -1, Elapsed: elapsed},
				fmt.Errorf("vmtest: the guest did not start the command in 3 boots (qemu: %v); console:\n%s", runErr, tail)
		}
		return &Result{Output: out, ExitCode: -1, Elapsed: elapsed},
			fmt.Errorf("vmtest: the guest reported no exit status (qemu: %v); console:\n%s", runErr, tail)
	}
	rc, _ := strconv.Atoi(string(m[1]))
	return &Result{Output: out, ExitCode: rc, Elapsed: elapsed}, nil
}

func lastLines(s string, n int) string {
	s = strings.ReplaceAll(s, "\r", "")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeInitramfs writes the guest's root file system as an uncompressed
// newc cpio archive, which the kernel unpacks as it is.
func writeInitramfs(path, bb string, opts Options, cmd []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := &cpioWriter{w: bufio.NewWriterSize(f, 1<<20), dirs: map[string]bool{}}
	for _, d := range []string{"bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "test", "root"} {
		w.dir(d)
	}
	if err := w.hostFile("bin/busybox", bb, 0o755); err != nil {
		f.Close()
		return err
	}
	applets, err := exec.Command(bb, "--list").Output()
	if err != nil {
		f.Close()
		return fmt.Errorf("vmtest: %s --list: %w", bb, err)
	}
	for _, applet := range strings.Fields(string(applets)) {
		if applet != "busybox" {
			w.symlink("bin/"+applet, "/bin/busybox")
		}
	}
	w.file("init", []byte(initScript), 0o755)
	w.file("etc/cmd", []byte(shellQuote(cmd)+"\n"), 0o644)
	var env strings.Builder
	for _, e := range opts.Env {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			f.Close()
			return fmt.Errorf("vmtest: env %q is not KEY=value", e)
		}
		fmt.Fprintf(&env, "export %s=%s\n", k, shellQuote([]string{v}))
	}
	w.file("etc/env", []byte(env.String()), 0o644)
	names := make([]string, 0, len(opts.Files))
	for name := range opts.Files {
		names = append(names, name)
	}
	// Sorted, a directory's entry comes before its files'.
	slices.Sort(names)
	for _, name := range names {
		clean := filepath.Clean(name)
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
			f.Close()
			return fmt.Errorf("vmtest: guest file %q must be relative to /test", name)
		}
		for d := filepath.Dir(clean); d != "."; d = filepath.Dir(d) {
			w.dir("test/" + d)
		}
		if err := w.hostFile("test/"+clean, opts.Files[name], 0); err != nil {
			f.Close()
			return err
		}
	}
	w.trailer()
	if err := w.err; err != nil {
		f.Close()
		return err
	}
	if err := w.w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// shellQuote renders args as one line for the guest's sh.
func shellQuote(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// cpioWriter writes the "newc" cpio format the kernel's initramfs unpacker
// reads: a 110-byte ASCII header, the NUL-terminated name, the data, each
// padded to 4 bytes.
type cpioWriter struct {
	w    *bufio.Writer
	ino  int
	dirs map[string]bool
	err  error
}

const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
)

func (c *cpioWriter) header(name string, mode, size int) {
	if c.err != nil {
		return
	}
	c.ino++
	_, c.err = fmt.Fprintf(c.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if c.err != nil {
		return
	}
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.pad(110 + len(name) + 1)
}

func (c *cpioWriter) pad(n int) {
	for ; n%4 != 0; n++ {
		c.w.WriteByte(0)
	}
}

func (c *cpioWriter) dir(name string) {
	if c.dirs[name] {
		return
	}
	c.dirs[name] = true
	c.header(name, cpioDir|0o755, 0)
}

func (c *cpioWriter) file(name string, data []byte, perm int) {
	c.header(name, cpioFile|perm, len(data))
	if c.err != nil {
		return
	}
	c.w.Write(data)
	c.pad(len(data))
}

func (c *cpioWriter) symlink(name, target string) {
	c.header(name, cpioSymlink|0o777, len(target))
	if c.err != nil {
		return
	}
	c.w.WriteString(target)
	c.pad(len(target))
}

// hostFile copies a host file; perm 0 keeps the host file's permissions.
func (c *cpioWriter) hostFile(name, path string, perm int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	if perm == 0 {
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("vmtest: %w", err)
		}
		perm = int(st.Mode().Perm())
	}
	c.file(name, data, perm)
	return c.err
}

func (c *cpioWriter) trailer() {
	c.header("TRAILER!!!", 0, 0)
	if c.err == nil {
		c.err = c.w.Flush()
	}
}
