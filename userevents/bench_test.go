package userevents_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// Run with -cpu 1,8: Enabled is read by every producer goroutine at once.
func BenchmarkEnabled(b *testing.B) {
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(inproc.New(sys).Options())
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
		idx := ev.WriteIndex()
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

func kernelBenchEvent(b *testing.B) (*userevents.Event, int, string) {
	if f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel}); err == nil {
		b.Cleanup(func() { f.Close() })
		ev, err := f.Register("bench_kernel_write u32 a; u64 b; u32 c; char[16] d; u16 e", 0)
		if err != nil {
			b.Fatal(err)
		}
		root, _ := userevents.FindTracefs()
		fs, err := tracefs.Open(&userevents.Options{Backend: userevents.Kernel})
		if err != nil {
			b.Fatal(err)
		}
		if err := fs.WriteFile("events/user_events/bench_kernel_write/enable", []byte("1"), 0); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { fs.WriteFile("events/user_events/bench_kernel_write/enable", []byte("0"), 0) })
		return ev, userevents.KernelFD(f), filepath.Join(root, "user_events_data")
	}
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return userevents.KernelEventOnFD(b, fd), fd, "/dev/null (this kernel has no user_events)"
}

// BenchmarkDaemonWrite is the daemon backend's write path: a round trip on
// the socket per record, with the event enabled in the trace buffer. The
// daemon runs in another process, as it does in use: in this one, a
// producer blocked in recv(2) would hold the P the daemon's goroutine needs.
func BenchmarkDaemonWrite(b *testing.B) {
	benchWrite(b, &userevents.Options{Backend: userevents.Daemon, Socket: benchDaemon(b), Transport: userevents.SocketTransport}, nil)
}

// BenchmarkInProcessWrite is the in-process backend's write path.
func BenchmarkInProcessWrite(b *testing.B) {
	k := inproc.New(subsys.New(subsys.Options{NumCPU: 2}))
	benchWrite(b, k.Options(), k.Tracefs())
}

// benchWrite writes into the tree t (nil: the one o opens) with the event
// enabled.
func benchWrite(b *testing.B, o *userevents.Options, t *tracefs.Tracefs) {
	f, err := userevents.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("bench_write u32 a; u64 b; u32 c; char[16] d; u16 e", 0)
	if err != nil {
		b.Fatal(err)
	}
	if t == nil {
		if t, err = tracefs.Open(o); err != nil {
			b.Fatal(err)
		}
		defer t.Close()
	}
	if err := t.WriteFile("events/user_events/bench_write/enable", []byte("1"), 0); err != nil {
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

// benchDaemon starts a daemon in a child process, as a real one runs, and
// returns its socket once it answers.
func benchDaemon(b *testing.B) string {
	sock, _ := userevents.DaemonProcess(b)
	return sock
}
