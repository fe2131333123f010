// Package tracefsns starts a program in a mount namespace of its own in
// which /sys/kernel/tracing (and /sys/kernel/debug/tracing, where the machine
// has it) is another directory: a uetrace tracefs tree served over FUSE, so
// that the program's open("/sys/kernel/tracing/user_events_data") reaches the
// daemon instead of a kernel without user_events.
//
// It needs CAP_SYS_ADMIN (unshare(CLONE_NEWNS) and mount(2)): as root it works
// directly; an ordinary user gets it inside a user namespace of its own, which
// is uetrace run's business, not this package's. Nothing outside the new
// namespace changes: its mounts are made private first, so the bind mounts
// do not propagate back to the machine.
package tracefsns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Targets are the paths a tracefs tree is bound over, where they exist.
// /sys/kernel/tracing always does on a kernel with sysfs; debugfs's
// tracing link only where debugfs is mounted.
var Targets = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// Start starts cmd (as cmd.Start does) in a new mount namespace where dir is
// bound over each of Targets that exists. The caller's own namespace is left
// as it was.
//
// Go runs goroutines on shared threads, so the namespace is made on one
// locked OS thread that is never given back to the scheduler: the runtime
// ends the thread when its goroutine returns, so no other goroutine ever runs
// in the new namespace.
func Start(cmd *exec.Cmd, dir string) error {
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("tracefsns: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("tracefsns: %s: %w", dir, unix.ENOTDIR)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The main thread cannot be ended by the runtime; a namespace made
		// on it would outlive this call and leak to whatever the scheduler
		// runs there later. Hand the work to another thread: while this
		// goroutine holds the main thread, the new one cannot get it.
		if unix.Gettid() == unix.Getpid() {
			inner := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				inner <- startIn(cmd, dir)
				// No UnlockOSThread: the thread is in the new namespace.
			}()
			err := <-inner
			runtime.UnlockOSThread()
			done <- err
			return
		}
		done <- startIn(cmd, dir)
		// No UnlockOSThread: the thread is in the new namespace.
	}()
	return <-done
}

// startIn runs on a locked thread that will never run anything else.
func startIn(cmd *exec.Cmd, dir string) error {
	// unshare(CLONE_NEWNS) on a thread of a multi-threaded process: the
	// kernel also unshares the thread's fs_struct (CLONE_FS is implied),
	// which is what lets one thread have its own mount namespace.
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return explain("unshare(CLONE_NEWNS)", err)
	}
	// Mounts are shared with the parent namespace on most distributions
	// (systemd makes / shared): without this the bind mounts below would
	// appear on the whole machine.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return explain("making / private in the new namespace", err)
	}
	bound := 0
	for _, target := range Targets {
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount(dir, target, "", unix.MS_BIND, ""); err != nil {
			return explain("bind-mounting "+dir+" over "+target, err)
		}
		bound++
	}
	if bound == 0 {
		return fmt.Errorf("tracefsns: none of %v exists to bind %s over: %w", Targets, dir, unix.ENOENT)
	}
	return cmd.Start()
}

func explain(op string, err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("tracefsns: %s: %w (a mount namespace needs CAP_SYS_ADMIN: run as root, or inside a user namespace)", op, err)
	}
	return fmt.Errorf("tracefsns: %s: %w", op, err)
}
