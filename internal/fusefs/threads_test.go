package fusefs

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestThreadsKept: a thread's files are kept between looks, tell its
// process and command name, follow a change of name, and are dropped when
// the thread has exited — the kept stat's read fails, though a new thread
// may have its number by then.
func TestThreadsKept(t *testing.T) {
	var ts threads
	defer ts.Close()
	tgidCalls := 0
	tgid := func(tid int) (resolved, error) {
		tgidCalls++
		return resolved{tid: tid, tgid: (&FS{}).tgid(tid), mayTrace: true}, nil
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	c, ok := ts.look(tid, tgid)
	if !ok || c.tgid != os.Getpid() {
		t.Fatalf("look(own thread): %+v, %v; want tgid %d", c, ok, os.Getpid())
	}
	var old, name [16]byte
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	copy(name[:], "kept-thread")
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0)
	if c, ok = ts.look(tid, tgid); !ok || c.comm != "kept-thread" {
		t.Errorf("after PR_SET_NAME: %+v, %v; want comm kept-thread", c, ok)
	}
	if tgidCalls != 1 {
		t.Errorf("the process id was read %d times for one thread; want once", tgidCalls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "60")
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	c, ok = ts.look(pid, tgid)
	if !ok || c.tgid != pid || c.comm != "sleep" {
		t.Fatalf("look(child): %+v, %v; want tgid %d, comm sleep", c, ok, pid)
	}
	// Root reads its system call once it sleeps (until then it is
	// "running", or exec'ing).
	for deadline := time.Now().Add(30 * time.Second); os.Geteuid() == 0 && !c.callOK; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("root could not read the sleeping child's system call in 30 s")
		}
		if c, ok = ts.look(pid, tgid); !ok {
			t.Fatalf("look(child) failed while it lives")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if c, ok = ts.look(pid, tgid); ok {
		t.Errorf("look(exited child): %+v, true; want false", c)
	}
	ts.mu.Lock()
	_, kept := ts.m[pid]
	ts.mu.Unlock()
	if kept {
		t.Error("the exited child is still kept")
	}
}

// TestThreadsBounded: past maxThreads, exited threads are closed first and
// the count stays bounded.
func TestThreadsBounded(t *testing.T) {
	var ts threads
	defer ts.Close()
	tgid := func(tid int) (resolved, error) { return resolved{tid: tid, tgid: tid, mayTrace: true}, nil }
	self := unix.Gettid()
	// Fill the table with entries for this thread under other numbers, as
	// if kept: open files of a live thread.
	ts.mu.Lock()
	ts.m = map[int]*thread{}
	for i := range maxThreads {
		ts.m[-1-i] = &thread{tid: -1 - i, stat: openProc(self, "stat"), syscall: -1}
	}
	ts.mu.Unlock()
	if _, ok := ts.look(os.Getpid(), tgid); !ok {
		t.Fatal("look(own process) failed")
	}
	ts.mu.Lock()
	n := len(ts.m)
	ts.mu.Unlock()
	if n > maxThreads {
		t.Errorf("%d threads kept; want at most %d", n, maxThreads)
	}
}

// BenchmarkThreadsLook is what a FUSE write learns of its caller (system
// call, command name, CPU, process): "kept" re-reads the kept files, "open"
// opens them and reads the status each time, as every write did before.
func BenchmarkThreadsLook(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	tgid := func(tid int) (resolved, error) {
		return resolved{tid: tid, tgid: (&FS{}).tgid(tid), mayTrace: true}, nil
	}
	b.Run("kept", func(b *testing.B) {
		var ts threads
		defer ts.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ts.look(tid, tgid); !ok {
				b.Fatal("look failed")
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ts threads
			if _, ok := ts.look(tid, tgid); !ok {
				b.Fatal("look failed")
			}
			ts.Close()
		}
	})
}
