// Package procmemtest runs the child process that the tests of procmem and
// of the packages built on it read and write: a small C program (compiled
// with gcc into the test's temporary directory) that maps a read-write
// page, a hole and a read-only page, prints their addresses, and obeys
// commands on its standard input (see testdata/child.c). It is for tests only.
package procmemtest

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

//go:embed testdata/child.c
var childSource []byte

// Timeout bounds every wait for the child.
const Timeout = 30 * time.Second

// Build compiles the child into t's temporary directory and returns its
// path. It skips the test when gcc is missing.
func Build(t testing.TB) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "child.c")
	if err := os.WriteFile(src, childSource, 0o600); err != nil {
		t.Fatal(err)
	}
	return testutil.BuildC(t, "", src, "-O1", "-Wall", "-pthread")
}

// Child is a running child process.
type Child struct {
	t     testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string

	Pid               int
	RW, Hole, RW2, RO uint64 // the pages' addresses
}

// Start starts the child built by Build and waits for its addresses. The
// child is killed when the test ends.
func Start(t testing.TB, bin string) *Child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*Timeout)
	cmd := exec.CommandContext(ctx, bin)
	cmd.WaitDelay = time.Second
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{t: t, cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	c.Ready()
	return c
}

// Line returns the child's next output line.
func (c *Child) Line() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("child: output ended")
		}
		return l
	case <-time.After(Timeout):
		c.t.Fatal("child: no answer within the timeout")
	}
	return ""
}

// Ready reads the line the child prints at its start (and after exec) and
// sets the addresses from it.
func (c *Child) Ready() {
	c.t.Helper()
	l := c.Line()
	for f := range strings.FieldsSeq(l) {
		k, v, _ := strings.Cut(f, "=")
		if k == "pid" {
			n, err := strconv.Atoi(v)
			if err != nil {
				c.t.Fatalf("child: bad line %q", l)
			}
			c.Pid = n
			continue
		}
		n, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			c.t.Fatalf("child: bad line %q", l)
		}
		switch k {
		case "rw":
			c.RW = n
		case "hole":
			c.Hole = n
		case "rw2":
			c.RW2 = n
		case "ro":
			c.RO = n
		}
	}
	if c.Pid == 0 || c.RW == 0 || c.RO == 0 {
		c.t.Fatalf("child: bad ready line %q", l)
	}
}

// Send writes a command line without waiting for an answer.
func (c *Child) Send(format string, args ...any) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		c.t.Fatalf("child: %v", err)
	}
}

// Do sends a command and returns the child's answer.
func (c *Child) Do(format string, args ...any) string {
	c.t.Helper()
	c.Send(format, args...)
	return c.Line()
}

// Word is the 64-bit word at addr as the child itself reads it.
func (c *Child) Word(addr uint64) uint64 {
	c.t.Helper()
	l := c.Do("word %x", addr)
	n, err := strconv.ParseUint(l, 16, 64)
	if err != nil {
		c.t.Fatalf("child: word: %q", l)
	}
	return n
}

// Fork makes the child fork (or clone with CLONE_VM when vm is set) and
// returns the new process's pid. The new process waits until killed;
// the test's end kills it.
func (c *Child) Fork(vm bool) int {
	c.t.Helper()
	cmd := "fork"
	if vm {
		cmd = "clonevm"
	}
	l := c.Do("%s", cmd)
	pid, err := strconv.Atoi(l)
	if err != nil || pid <= 0 {
		c.t.Fatalf("child: %s: %q", cmd, l)
	}
	c.t.Cleanup(func() { _ = kill(pid) })
	return pid
}

// Thread starts a thread in the child and returns its thread id.
func (c *Child) Thread() int {
	c.t.Helper()
	l := c.Do("thread")
	tid, err := strconv.Atoi(strings.TrimPrefix(l, "tid "))
	if err != nil {
		c.t.Fatalf("child: thread: %q", l)
	}
	return tid
}

// Exec makes the child exec itself anew and waits for its new addresses.
func (c *Child) Exec() {
	c.t.Helper()
	c.Send("exec")
	c.Ready()
}

// Kill kills the child and reaps it.
func (c *Child) Kill() {
	c.t.Helper()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// AsUser runs f on a thread of its own whose real, effective and saved user
// ids are uid, and returns f's result. Linux credentials are per thread (the
// C library and Go's syscall.Setuid change them on every thread; the raw
// system call here does not), and the thread is discarded afterwards, so
// the rest of the test process keeps its own. Only root can do this.
func AsUser(t testing.TB, uid int, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with the goroutine.
		runtime.LockOSThread()
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); errno != 0 {
			done <- fmt.Errorf("setresuid(%d): %w", uid, errno)
			return
		}
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(Timeout):
		t.Fatal("AsUser: no result within the timeout")
	}
	return nil
}
