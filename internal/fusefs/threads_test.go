package fusefs

import (
	"context"
	"io"
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

// TestThreadsLookWhileRunning: a thread whose system call is read while it
// still runs — a FUSE writer between queueing its request and sleeping in
// request_wait_answer, which the kernel shows as "running" — is read again
// until it sleeps in its call, and its call is the one it sleeps in: taken
// as no call, a pwrite's offset and a faulted buffer would go unchecked.
// The thread here (a shell's) runs until the reader has seen it running and
// signalled it, then blocks in read(2) on its stdin.
func TestThreadsLookWhileRunning(t *testing.T) {
	var ts threads
	defer ts.Close()
	resolve := func(tid int) (resolved, error) {
		return resolved{tid: tid, tgid: tid, mayTrace: true}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `trap 'stop=1' USR1; echo spinning; while [ -z "$stop" ]; do :; done; read x`)
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var line [9]byte
	if _, err := io.ReadFull(stdout, line[:]); err != nil || string(line[:]) != "spinning\n" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	go func() {
		// Once the reader has found the shell running, stop its loop.
		for ts.running.Load() == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(unix.SIGUSR1)
	}()
	c, ok := ts.look(cmd.Process.Pid, resolve)
	if !ok || !c.callOK {
		t.Fatalf("look: %+v, %v; want the call read", c, ok)
	}
	if c.call.Nr != unix.SYS_READ || c.call.Args[0] != 0 {
		t.Errorf("the call read is %d(%#x, ...), want read(0, ...)", c.call.Nr, c.call.Args[0])
	}
	if ts.running.Load() == 0 {
		t.Error("the shell was never seen running")
	}
	t.Logf("%d reads found the shell running", ts.running.Load())
	stdin.Write([]byte("\n"))
}

// TestThreadsCPUAge: the CPU a write carries is its thread's as stat last
// said, read again once cpuAge has passed — here after the thread moved to
// another CPU. (Within cpuAge it may still be the CPU it left, where Linux
// records the CPU of each write: the package doc's difference.)
func TestThreadsCPUAge(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for cpu := 0; cpu < 1024 && len(cpus) < 2; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) < 2 {
		t.Skip("needs two CPUs to move a thread between")
	}
	var ts threads
	defer ts.Close()
	resolve := func(tid int) (resolved, error) {
		return resolved{tid: tid, tgid: os.Getpid(), mayTrace: true}, nil
	}
	// The thread moves to CPU cpus[i] and sleeps in a read of pipe i.
	var pipes [2][2]*os.File
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		pipes[i] = [2]*os.File{r, w}
	}
	fds := [2]int{int(pipes[0][0].Fd()), int(pipes[1][0].Fd())}
	moved := make(chan int)
	go func() {
		// Locked for good: the thread, its affinity changed, ends with
		// the goroutine.
		runtime.LockOSThread()
		var b [1]byte
		for i, cpu := range cpus {
			var one unix.CPUSet
			one.Set(cpu)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				t.Error(err)
			}
			moved <- unix.Gettid()
			unix.Read(fds[i], b[:])
		}
	}()
	// lookAsleep looks at the thread once it sleeps in read(2) on fd.
	lookAsleep := func(tid, fd int) caller {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			c, ok := ts.look(tid, resolve)
			if !ok {
				t.Fatal("look failed while the thread lives")
			}
			if c.callOK && c.call.Nr == unix.SYS_READ && c.call.Args[0] == uint64(fd) {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("the thread did not sleep in read(%d) within a minute: %+v", fd, c)
			}
		}
	}
	tid := <-moved
	c := lookAsleep(tid, fds[0])
	if c.cpu != cpus[0] {
		t.Fatalf("on CPU %d, the write carries CPU %d", cpus[0], c.cpu)
	}
	first := time.Now()
	pipes[0][1].Write([]byte{1})
	<-moved
	for time.Since(first) <= cpuAge {
		time.Sleep(cpuAge)
	}
	if c = lookAsleep(tid, fds[1]); c.cpu != cpus[1] {
		t.Errorf("moved to CPU %d more than %v ago, the write carries CPU %d", cpus[1], cpuAge, c.cpu)
	}
	pipes[1][1].Write([]byte{1})
}
