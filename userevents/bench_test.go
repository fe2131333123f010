package userevents

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Run with -cpu 1,8: Enabled is read by every producer goroutine at once.
func BenchmarkEnabled(b *testing.B) {
	sys := subsys.New(subsys.Options{})
	f, err := Open(Options{Backend: InProcess, Subsystem: sys})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("bench_enabled u32 a", 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		if err := sys.SetFtrace(sys.Lookup("user_events", "bench_enabled"), on); err != nil {
			b.Fatal(err)
		}
		if ev.Enabled() != on {
			b.Fatalf("Enabled() = %v, want %v", !on, on)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var total atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if ev.Enabled() {
						n++
					}
				}
				total.Add(int64(n))
			})
			if on && total.Load() == 0 {
				b.Error("Enabled() never read true")
			}
		})
	}
}

// payload is a 5-field record's payload (u32, u64, u32, char[16], u16).
var payload = make([]byte, 4+8+4+16+2)

// BenchmarkKernelWrite compares Event.Write of the kernel backend with a
// bare writev(2) of the same bytes to the same descriptor. On a kernel with
// user_events it is user_events_data with the event enabled; elsewhere
// /dev/null, which still measures what the library adds to the system call.
func BenchmarkKernelWrite(b *testing.B) {
	ev, fd, target := kernelBenchEvent(b)
	b.Logf("writing to %s", target)
	b.Run("userevents", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-writev", func(b *testing.B) {
		b.ReportAllocs()
		idx := ev.index
		iov := [2]unix.Iovec{
			{Base: (*byte)(unsafe.Pointer(&idx)), Len: 4},
			{Base: &payload[0], Len: uint64(len(payload))},
		}
		for b.Loop() {
			_, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), 2)
			if e != 0 {
				b.Fatal(e)
			}
		}
	})
}

func kernelBenchEvent(b *testing.B) (*Event, int, string) {
	if f, err := Open(Options{Backend: Kernel}); err == nil {
		b.Cleanup(func() { f.Close() })
		ev, err := f.Register("bench_kernel_write u32 a; u64 b; u32 c; char[16] d; u16 e", 0)
		if err != nil {
			b.Fatal(err)
		}
		root, _ := FindTracefs()
		fs, err := OpenTracefs(Options{Backend: Kernel})
		if err != nil {
			b.Fatal(err)
		}
		if err := fs.WriteFile("events/user_events/bench_kernel_write/enable", []byte("1"), 0); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { fs.WriteFile("events/user_events/bench_kernel_write/enable", []byte("0"), 0) })
		return ev, f.kfd, filepath.Join(root, "user_events_data")
	}
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	a, err := privateArena()
	if err != nil {
		b.Fatal(err)
	}
	f := &File{backend: Kernel, arena: a, kfd: fd, events: map[*Event]struct{}{}}
	slot, err := a.alloc()
	if err != nil {
		b.Fatal(err)
	}
	ev := &Event{f: f, index: 0, cmd: "bench u32 a", slot: slot}
	ev.word.Store(a.word(slot))
	return ev, fd, "/dev/null (this kernel has no user_events)"
}

// BenchmarkDaemonWrite is the daemon backend's write path: a round trip on
// the socket per record, with the event enabled in the trace buffer. The
// daemon runs in another process, as it does in use: in this one, a
// producer blocked in recv(2) would hold the P the daemon's goroutine needs.
func BenchmarkDaemonWrite(b *testing.B) {
	benchWrite(b, Options{Backend: Daemon, Socket: benchDaemon(b), Transport: SocketTransport})
}

// benchDaemon starts a daemon in a child process, as a real one runs, and
// returns its socket once it answers.
func benchDaemon(b *testing.B) string {
	sock, _ := DaemonProcess(b)
	return sock
}

// DaemonProcess starts a daemon in a child process (the test binary, whose
// TestMain serves when UETRACE_BENCH_DAEMON names a socket) and returns its
// socket once it answers, and the process; the test's cleanup kills it.
func DaemonProcess(tb testing.TB) (string, *os.Process) {
	sock := filepath.Join(tb.TempDir(), "bench.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "UETRACE_BENCH_DAEMON="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if c, err := client.Dial(sock, nil); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			tb.Fatal("the daemon did not start")
		}
	}
	return sock, cmd.Process
}

// TestMain serves as the benchmark's daemon when asked to.
func TestMain(m *testing.M) {
	if sock := os.Getenv("UETRACE_BENCH_DAEMON"); sock != "" {
		ln, err := daemon.Listen(sock)
		if err != nil {
			panic(err)
		}
		daemon.New(daemon.Config{Logger: slog.New(slog.DiscardHandler)}).Serve(ln)
		return
	}
	os.Exit(m.Run())
}

// BenchmarkInProcessWrite is the in-process backend's write path.
func BenchmarkInProcessWrite(b *testing.B) {
	benchWrite(b, Options{Backend: InProcess, Subsystem: subsys.New(subsys.Options{NumCPU: 2})})
}

func benchWrite(b *testing.B, o Options) {
	f, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("bench_write u32 a; u64 b; u32 c; char[16] d; u16 e", 0)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := OpenTracefs(o)
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	if err := fs.WriteFile("events/user_events/bench_write/enable", []byte("1"), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
