package procfs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseSyscall(t *testing.T) {
	for _, c := range []struct {
		text string
		want Syscall
		err  error
	}{
		{"1 0x3 0x7ffd1000 0x10 0x0 0x0 0x0 0x7ffd0ff8 0x7f00aa\n", Syscall{Nr: 1, Args: [6]uint64{3, 0x7ffd1000, 0x10}}, nil},
		{"18 0x3 0x5000 0x4 0x8 0x0 0x0 0x7ffd0ff8 0x7f00aa", Syscall{Nr: unix.SYS_PWRITE64, Args: [6]uint64{3, 0x5000, 4, 8}}, nil},
		{"1 0x3 0x7FFD1000 0x10 0x0 0x0 0x0 0x7ffd0ff8 0x7f00aa\n", Syscall{Nr: 1, Args: [6]uint64{3, 0x7ffd1000, 0x10}}, nil},
		{"running\n", Syscall{}, ErrRunning},
		{"running\n", Syscall{}, ErrNotInSyscall},
		{"-1 0x7ffd0ff8 0x7f00aa\n", Syscall{}, ErrNotInSyscall},
		{"", Syscall{}, unix.EINVAL},
		{"x 0x1", Syscall{}, unix.EINVAL},
		{"1 0x3", Syscall{}, unix.EINVAL},
		{"-1", Syscall{}, unix.EINVAL},
		{"1 3 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"1 0xg 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"1 0x10000000000000000 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"1 0x 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"1  0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"1 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0 ", Syscall{}, unix.EINVAL},
		{"1 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0", Syscall{}, unix.EINVAL},
		{"running now", Syscall{}, unix.EINVAL},
	} {
		got, err := ParseSyscall([]byte(c.text))
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ParseSyscall(%q) = %v, want %v", c.text, err, c.err)
			}
			continue
		}
		if c.text == "-1 0x7ffd0ff8 0x7f00aa\n" && errors.Is(err, ErrRunning) {
			t.Errorf("ParseSyscall(%q) = %v: a thread outside a system call is not running", c.text, err)
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSyscall(%q) = %+v, %v; want %+v", c.text, got, err, c.want)
		}
	}
}

func TestParseSyscallFixtures(t *testing.T) {
	if c, err := ParseSyscall(fixture(t, "syscall-write")); err != nil || c != (Syscall{Nr: 1, Args: [6]uint64{3, 0x7ffd1000, 0x10}}) {
		t.Errorf("syscall-write: %+v, %v", c, err)
	}
	for _, name := range []string{"syscall-running", "syscall-fault"} {
		if _, err := ParseSyscall(fixture(t, name)); !errors.Is(err, ErrNotInSyscall) {
			t.Errorf("%s: %v, want ErrNotInSyscall", name, err)
		}
	}
}

func FuzzParseSyscall(f *testing.F) {
	for _, name := range []string{"syscall-write", "syscall-running", "syscall-fault"} {
		f.Add(fixture(f, name))
	}
	for _, s := range []string{"running", "-1 0x1 0x2", "1 0x3 0x7ffd1000 0x10 0x0 0x0 0x0 0x7ffd0ff8 0x7f00aa\n", "0x", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseSyscall(b)
		if err == nil && c.Nr < 0 {
			t.Fatalf("ParseSyscall(%q) gave a negative call number", b)
		}
		if err != nil && !errors.Is(err, ErrNotInSyscall) && !errors.Is(err, unix.EINVAL) {
			t.Fatalf("ParseSyscall(%q): %v, neither ErrNotInSyscall nor EINVAL", b, err)
		}
	})
}

// TestReadBlockedRead reads the call of a real thread blocked in read(2) on
// a pipe nobody writes.
func TestReadBlockedRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// sh's read builtin reads its stdin one byte at a time.
	cmd := exec.CommandContext(ctx, "sh", "-c", "read x")
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	// Wait until the shell is blocked in read(2) on fd 0.
	for {
		c, err := ReadSyscall(pid)
		if err == nil && c.Nr == unix.SYS_READ && c.Args[0] == 0 {
			if c.Args[2] == 0 {
				t.Errorf("read(2) of length 0: %+v", c)
			}
			return
		}
		if err != nil && !errors.Is(err, ErrNotInSyscall) {
			t.Fatalf("ReadSyscall(%d): %v", pid, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the shell never blocked in read(0, ...): last %+v %v", c, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestReadNoThread(t *testing.T) {
	// pid_max is at most 4194304: a larger tid never exists.
	if _, err := ReadSyscall(1 << 23); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadSyscall of a thread that cannot exist = %v, want ENOENT", err)
	}
}

// BenchmarkParseSyscall is a FUSE write's parse of its caller's call: no
// allocation.
func BenchmarkParseSyscall(b *testing.B) {
	text := []byte("20 0x3 0x7ffd6b3c1a30 0x2 0x0 0x0 0x0 0x7ffd6b3c1a08 0x7f3b8c91e2a7\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSyscall(text); err != nil {
			b.Fatal(err)
		}
	}
}
