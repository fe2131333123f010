// Package testutil is what uetrace's tests share, and it is for tests only:
// no product package imports it outside its _test.go files (layout_test.go's
// TestTestutilForTestsOnly), only the test-helper packages (…test) and the
// tooling do. It imports nothing of uetrace, so that the tests of any
// package, the lowest too, may use it.
//
//   - Wait and Eventually: wait for a condition, never for a fixed time — a
//     test that sleeps fails on a busy machine;
//   - NeedRoot, NeedFUSE, NeedPerfmon, NeedPerf, NeedGCC: skip, saying what
//     is missing and what for, where the machine cannot run the test;
//   - BuildC: a C program of a test's testdata, built with gcc;
//   - Buffer: a process's or a logger's output, read while it is written;
//   - Uetrace and Run: the uetrace command built once per test binary, and
//     removed when it ends;
//   - CPUTime: the CPU this process has used, for a benchmark that reports
//     what its work cost beside how long it took.
//
// A daemon served in the test's own process is package
// internal/daemon/daemontest's.
package testutil

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Timeout is how long Wait and Eventually wait: long, since a wait ends as
// soon as its condition holds, and a loaded machine (two cores shared by
// several builds, -race) can be slow by a factor of a hundred.
const Timeout = 2 * time.Minute

// Eventually polls cond until it holds, and reports whether it did within
// Timeout. It polls every millisecond at first, backing off to every 20
// ms: a condition that holds at once costs nothing, and one that runs a
// command does not run it a thousand times a second.
func Eventually(cond func() bool) bool {
	deadline := time.Now().Add(Timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// Wait polls cond until it holds, as Eventually, and fails the test
// ("timed out waiting for " + what) if it does not within Timeout.
func Wait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !Eventually(cond) {
		tb.Fatalf("timed out waiting for %s (%v)", what, Timeout)
	}
}

// Buffer collects what a process or a logger writes while the test reads
// it: bytes.Buffer's Write and String, safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// SharedDir is a new directory that other users can reach (mode 0755, in
// the system's temporary directory; t.TempDir's are this user's alone),
// for the programs and sockets of a test that runs processes as other
// users. It is removed when the test ends.
func SharedDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "uetrace-shared")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// CPUTime is the CPU time this process has used so far: user and system,
// all its threads (getrusage RUSAGE_SELF). A process it talks to — a
// daemon in a child — is not in it.
func CPUTime() time.Duration {
	var ru unix.Rusage
	// RUSAGE_SELF and a valid pointer: getrusage(2) has no error left.
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
