package vmtest

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// A Worker is a goroutine locked to an OS thread pinned to one CPU, for
// the programs the tests run in the guest: what it writes to a trace
// buffer lands on that CPU's (the kernel reserves a record on the CPU the
// writing thread runs on), under its thread id, TID.
type Worker struct {
	TID  int
	jobs chan func()
}

// NewWorker starts a Worker pinned to cpu (sched_setaffinity). It lives as
// long as the program.
func NewWorker(cpu int) (*Worker, error) {
	w := &Worker{jobs: make(chan func())}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		w.TID = unix.Gettid()
		errc <- nil
		for f := range w.jobs {
			f()
		}
	}()
	return w, <-errc
}

// Do runs f on the worker's thread and returns when it has.
func (w *Worker) Do(f func()) {
	done := make(chan struct{})
	w.jobs <- func() { f(); close(done) }
	<-done
}
