package stamp

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func monotonic(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// Now is CLOCK_MONOTONIC itself: read between two clock_gettime calls it
// lies between them, whatever the machine's load (the clock only goes
// forward).
func TestNowIsClockMonotonic(t *testing.T) {
	for range 1000 {
		a := monotonic(t)
		n := Now()
		b := monotonic(t)
		if n < a || n > b {
			t.Fatalf("Now() = %d, not between clock_gettime(CLOCK_MONOTONIC) %d and %d", n, a, b)
		}
	}
}

func TestPid(t *testing.T) {
	if Pid() != int32(unix.Getpid()) || Take().PID != Pid() {
		t.Fatalf("Pid() = %d, Take().PID = %d, getpid = %d", Pid(), Take().PID, unix.Getpid())
	}
}

// pinTo moves the calling (locked) thread to cpu and waits until the
// kernel has it there.
func pinTo(t *testing.T, cpu int) {
	t.Helper()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatalf("sched_setaffinity to CPU %d: %v", cpu, err)
	}
	deadline := time.Now().Add(time.Minute)
	for getcpuSyscall() != uint32(cpu) {
		if time.Now().After(deadline) {
			t.Fatalf("thread still not on CPU %d a minute after sched_setaffinity", cpu)
		}
		runtime.Gosched()
	}
}

// With the thread pinned to each allowed CPU in turn, CPU() and Take().CPU
// say that CPU, as getcpu(2) does.
func TestCPUOnEachCPU(t *testing.T) {
	runtime.LockOSThread()
	// The thread's affinity is changed: let it die with the test rather
	// than go back to the runtime's pool pinned.
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	t.Logf("LSL in use: %v", lslInUse())
	for c := range 1024 {
		if !all.IsSet(c) {
			continue
		}
		pinTo(t, c)
		for range 100 {
			if got := CPU(); got != uint32(c) {
				t.Fatalf("pinned to CPU %d, CPU() = %d", c, got)
			}
			if got := Take().CPU; got != uint32(c) {
				t.Fatalf("pinned to CPU %d, Take().CPU = %d", c, got)
			}
			if _, got := TidCPU(); got != uint32(c) {
				t.Fatalf("pinned to CPU %d, TidCPU() says CPU %d", c, got)
			}
			if got := getcpuSyscall(); got != uint32(c) {
				t.Fatalf("pinned to CPU %d, getcpu(2) = %d", c, got)
			}
		}
	}
	if err := unix.SchedSetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	runtime.UnlockOSThread()
}

// Goroutines locked to their own threads, more of them than Ps, take turns
// on the Ps: each P's cache sees its M change all the time, and each
// goroutine must get its own thread's id every time.
func TestTidLockedThreads(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run("GOMAXPROCS="+strconv.Itoa(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var wg sync.WaitGroup
			errs := make(chan string, 8)
			for range 8 {
				wg.Go(func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					want := int32(unix.Gettid())
					for i := range 2000 {
						if got := Tid(); got != want {
							errs <- "Tid() = " + strconv.Itoa(int(got)) + " on thread " + strconv.Itoa(int(want))
							return
						}
						if got := Take().TID; got != want {
							errs <- "Take().TID = " + strconv.Itoa(int(got)) + " on thread " + strconv.Itoa(int(want))
							return
						}
						if got, _ := TidCPU(); got != want {
							errs <- "TidCPU() = " + strconv.Itoa(int(got)) + " on thread " + strconv.Itoa(int(want))
							return
						}
						switch i % 3 {
						case 0:
							runtime.Gosched()
						case 1:
							// A blocking system call: the P may be handed
							// to another thread meanwhile.
							unix.Nanosleep(&unix.Timespec{Nsec: 1000}, nil)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// A P beyond the cache's slots (GOMAXPROCS raised after start-up; here the
// cache is emptied to be sure of it) is answered by the system call and
// gets its slot for the next time.
func TestTidMoreProcs(t *testing.T) {
	if !tidCache {
		t.Skip("no thread id cache on this architecture")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	slots.Store(new([]slot))
	want := int32(unix.Gettid())
	if got := Tid(); got != want {
		t.Fatalf("Tid() = %d on thread %d, P beyond the cache", got, want)
	}
	if len(*slots.Load()) == 0 {
		t.Fatal("the cache did not grow for the P beyond it")
	}
	for range 100 {
		if got := Tid(); got != want {
			t.Fatalf("Tid() = %d on thread %d after the cache grew", got, want)
		}
	}
}

// A slot that answers with a wrong thread id for the right M (an M reused
// for another thread) is corrected after at most refreshEvery answers.
func TestTidRefreshBound(t *testing.T) {
	if !tidCache {
		t.Skip("no thread id cache on this architecture")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: one slot in play
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	want := int32(unix.Gettid())
	const gone = -1 // no thread has this id
	p := procPin()
	e := &(*slots.Load())[p]
	poison(e, curm(), gone)
	procUnpin()
	stale := 0
	for Tid() == gone {
		stale++
		if stale > refreshEvery {
			t.Fatalf("still the poisoned thread id after %d lookups", stale)
		}
	}
	if stale != refreshEvery {
		t.Errorf("%d stale answers, want refreshEvery = %d", stale, refreshEvery)
	}
	if got := Tid(); got != want {
		t.Fatalf("Tid() = %d after the refresh, thread is %d", got, want)
	}
}

// An unlocked goroutine may move between threads, but what Tid() says is
// always one of this process's threads.
func TestTidIsAThreadOfThisProcess(t *testing.T) {
	for range 100 {
		tid := Tid()
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(int(tid))); err != nil {
			t.Fatalf("Tid() = %d, not a thread of this process: %v", tid, err)
		}
		runtime.Gosched()
	}
}

func TestZeroAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(1000, func() { _ = Take(); _ = Now(); _ = CPU(); _ = Tid() }); n != 0 {
		t.Fatalf("%v allocations per stamp", n)
	}
}

var sinkU64 uint64
var sinkU32 uint32
var sinkI32 int32
var sinkStamp Stamp

func BenchmarkNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkU64 = Now()
	}
}

func BenchmarkNowClockGettime(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkU64 = monotonic(b)
	}
}

func BenchmarkCPU(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkU32 = CPU()
	}
}

func BenchmarkCPUGetcpuSyscall(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkU32 = getcpuSyscall()
	}
}

func BenchmarkTid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkI32 = Tid()
	}
}

func BenchmarkTidGettid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkI32 = int32(unix.Gettid())
	}
}

func BenchmarkTake(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkStamp = Take()
	}
}

// What the in-process backend pays today for the same four values.
func BenchmarkTakeSyscalls(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkStamp = Stamp{Time: monotonic(b), PID: pid, TID: int32(unix.Gettid()), CPU: getcpuSyscall()}
	}
}

func BenchmarkTakeParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s Stamp
		for pb.Next() {
			s = Take()
		}
		sinkU32 = s.CPU
	})
}

// poison makes e answer tid for m, as a slot whose M was reused would.
//
//go:norace
func poison(e *slot, m uintptr, tid int32) { e.m, e.tid, e.uses = m, tid, 0 }
