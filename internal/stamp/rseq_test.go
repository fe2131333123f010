package stamp

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// rseqAvailable says whether the kernel has rseq(2): a registration of
// nothing fails with EINVAL there, ENOSYS where it does not exist.
func rseqAvailable() bool {
	_, _, e := unix.RawSyscall6(unix.SYS_RSEQ, 0, 0, 0, 0, 0, 0)
	return !errors.Is(e, unix.ENOSYS)
}

// wantRseqEnv makes the test binary, run again by TestCPUFromOwnRseq,
// require a mode.
const wantRseqEnv = "UETRACE_STAMP_WANT_RSEQ"

// Where the kernel has rseq(2), the CPU comes from it: the C library's
// struct rseq when it registered one (glibc 2.35+ in a cgo build), this
// package's own otherwise.
func TestRseqInUse(t *testing.T) {
	t.Logf("rseq: %s, LSL: %v", rseqInUse(), lslInUse())
	if want := os.Getenv(wantRseqEnv); want != "" && rseqInUse() != want {
		t.Fatalf("rseq mode %q, want %q", rseqInUse(), want)
	}
	if tidCache && rseqAvailable() && rseqInUse() == "none" {
		t.Fatal("the kernel has rseq(2), but the CPU is not read from a struct rseq")
	}
}

// Goroutines locked to threads pinned to different CPUs take turns on
// fewer Ps: each P's slot changes threads all the time and must read the
// CPU from the struct rseq of the thread it now runs, never another's.
func TestCPULockedPinnedThreads(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	for _, procs := range []int{1, 2} {
		t.Run("GOMAXPROCS="+strconv.Itoa(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var wg sync.WaitGroup
			errs := make(chan string, 8)
			for i := range 8 {
				wg.Go(func() {
					// The thread's affinity changes: it dies with the
					// goroutine (no UnlockOSThread) rather than go back
					// to the runtime's pool pinned.
					runtime.LockOSThread()
					c := cpus[i%len(cpus)]
					pinTo(t, c)
					for j := range 2000 {
						if got := CPU(); got != uint32(c) {
							errs <- "CPU() = " + strconv.Itoa(int(got)) + " on a thread pinned to CPU " + strconv.Itoa(c)
							return
						}
						if _, got := TidCPU(); got != uint32(c) {
							errs <- "TidCPU() says CPU " + strconv.Itoa(int(got)) + " on a thread pinned to CPU " + strconv.Itoa(c)
							return
						}
						if j%3 == 0 {
							runtime.Gosched()
						} else if j%3 == 1 {
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

// With the C library's registration turned off (glibc's tunable), this
// package registers its own struct rseq per thread: the CPU tests run
// again in a child that requires that mode.
func TestCPUFromOwnRseq(t *testing.T) {
	if os.Getenv(wantRseqEnv) != "" {
		t.Skip("in the child already")
	}
	if !tidCache || !rseqAvailable() {
		t.Skip("no rseq(2) or no thread cache here")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(TestRseqInUse|TestCPUOnEachCPU|TestCPULockedPinnedThreads|TestTidLockedThreads)$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GLIBC_TUNABLES=glibc.pthread.rseq=0", wantRseqEnv+"=own")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
