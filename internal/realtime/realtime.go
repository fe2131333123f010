// Package realtime gives every thread of the process a real-time
// scheduling policy, SCHED_FIFO at a priority, as perf record --realtime
// does for perf: a recording whose threads the kernel runs as soon as
// they are woken, ahead of every normal thread, where on a busy machine a
// normal thread may wait milliseconds for a CPU while a producer's ring
// fills (BENCHMARKS.md, "Data path").
//
// A Go program's threads come and go: those the runtime makes after Set
// inherit the policy from the thread that makes them (clone(2) without
// SCHED_RESET_ON_FORK), and Set gives it to those that exist. What it
// does not do: change the nice value of anything, or pin threads to CPUs.
// The kernel's real-time throttling (sched_rt_runtime_us, 95 % of each
// second by default) still leaves normal threads the rest.
package realtime

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// MaxPriority is the highest SCHED_FIFO priority (sched_get_priority_max).
const MaxPriority = 99

// Set gives every thread of the process SCHED_FIFO at prio (1 to
// MaxPriority). It needs CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least
// prio (EPERM otherwise, said so); a thread that ends meanwhile is
// skipped.
func Set(prio int) error {
	if prio < 1 || prio > MaxPriority {
		return fmt.Errorf("realtime priority %d: want 1 to %d (SCHED_FIFO): %w", prio, MaxPriority, unix.EINVAL)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	// A thread made while a pass runs may have been made by one not yet
	// changed: passes go on until one changes none.
	for range 16 {
		tids, err := threads()
		if err != nil {
			return err
		}
		changed := 0
		for _, tid := range tids {
			cur, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue // ended
			}
			if cur.Policy == unix.SCHED_FIFO && cur.Priority == uint32(prio) {
				continue
			}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
				if err == unix.ESRCH {
					continue
				}
				if err == unix.EPERM {
					return fmt.Errorf("realtime priority %d: SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of %d (ulimit -r): %w", prio, prio, err)
				}
				return fmt.Errorf("realtime priority %d: sched_setattr of thread %d: %w", prio, tid, err)
			}
			changed++
		}
		if changed == 0 {
			return nil
		}
	}
	return nil
}

// StartNormal starts c as c.Start does, from a thread of normal policy
// (SCHED_OTHER), so that c does not inherit the process's real-time one,
// as a workload perf record forks before it takes its priority does not.
// The thread ends with it.
func StartNormal(c *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, made normal, exits with the
		// goroutine rather than serve others.
		runtime.LockOSThread()
		normal := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
		if err := unix.SchedSetAttr(0, &normal, 0); err != nil {
			errc <- fmt.Errorf("realtime: a normal thread to start %s from: sched_setattr: %w", c.Path, err)
			return
		}
		errc <- c.Start()
	}()
	return <-errc
}

// threads are the process's thread ids (/proc/self/task).
func threads() ([]int, error) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("realtime: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("realtime: /proc/self/task: %w", err)
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
