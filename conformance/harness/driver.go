package harness

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Backends are the names Options.Backend takes: daemon-ring is the daemon
// with its clients writing through shared-memory rings (daemonring.go);
// fuse is the kernel backend's driver where /sys/kernel/tracing is
// uetrace's FUSE tree, under uetrace run (fuse.go).
var Backends = []string{"kernel", "daemon", "daemon-ring", "inprocess", "fuse"}

// Options configure a run of the driver.
type Options struct {
	Backend string // kernel, daemon, daemon-ring, inprocess or fuse
	// Socket is a running daemon's socket; "" starts one in this process.
	Socket string
	// Self is the driver's executable: each scenario on the kernel and
	// the daemon, and each child block, runs in a new process of it
	// ("": os.Executable).
	Self string
	// Uetrace is the uetrace binary whose `uetrace run --private` serves
	// the fuse backend's tree ("": built from this module).
	Uetrace string
}

// emptyStatus is user_events_status with no events.
const emptyStatus = "\nActive: 0\nBusy: 0\n"

// Run runs scenarios one after the other and writes each one's normalised
// results to w as "=== NAME\n" followed by its lines.
func Run(o Options, scenarios []*Scenario, w io.Writer) error {
	if o.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		o.Self = self
	}
	var run func(steps []Step) []byte
	var fs fileSystem
	switch o.Backend {
	case "inprocess":
		sys := subsys.New(subsys.Options{NumCPU: 2})
		fs = subsysFS{sys.FS()}
		run = func(steps []Step) []byte {
			p, err := newSubsysProc(sys)
			if err != nil {
				return []byte("= error: " + err.Error() + "\n")
			}
			return runProcess(p, steps)
		}
	case "fuse", "daemon", "daemon-ring", "kernel":
		if o.Backend == "fuse" {
			inside, err := checkFUSETree()
			if err != nil {
				return err
			}
			if !inside {
				return runUnderFUSE(o, scenarios, w)
			}
		}
		if (o.Backend == "daemon" || o.Backend == "daemon-ring") && o.Socket == "" {
			sock, stop, err := startDaemon()
			if err != nil {
				return err
			}
			defer stop()
			o.Socket = sock
		}
		if o.Backend == "kernel" || o.Backend == "fuse" {
			fs = kernelFS(TracefsRoot)
			if _, err := os.Stat(filepath.Join(TracefsRoot, "user_events_data")); err != nil {
				return fmt.Errorf("the %s backend needs user_events: %w", o.Backend, err)
			}
		} else {
			p, err := newDaemonProc(o.Socket, nil, false)
			if err != nil {
				return err
			}
			defer p.exit()
			fs = p.fs()
		}
		spawn := o.spawner()
		run = func(steps []Step) []byte {
			out, err := spawn(source(steps))
			if err != nil {
				out = append(out, "= child: "+errText(err)+"\n"...)
			}
			return out
		}
	default:
		return fmt.Errorf("unknown backend %q (want kernel, daemon, daemon-ring, inprocess or fuse)", o.Backend)
	}
	if err := cleanup(fs); err != nil {
		return fmt.Errorf("the %s backend is not clean before the first scenario: %w", o.Backend, err)
	}
	for _, sc := range scenarios {
		raw := run(sc.Steps)
		fmt.Fprintf(w, "=== %s\n%s", sc.Name, normalise(string(raw), multiNames(sc.Steps)))
		if err := cleanup(fs); err != nil {
			fmt.Fprintf(w, "= cleanup after the scenario: %v\n", err)
		}
	}
	return nil
}

// runProcess runs steps as one process and then ends it as exit(2) would.
func runProcess(p proc, steps []Step) []byte {
	var out bytes.Buffer
	runSteps(p, steps, &out)
	p.exit()
	return out.Bytes()
}

// spawner runs scenario text in a new process of the driver: "-child".
func (o Options) spawner() spawner {
	return func(text string) ([]byte, error) {
		args := []string{"-child", "-backend", o.Backend}
		if o.Socket != "" {
			args = append(args, "-socket", o.Socket)
		}
		cmd := exec.Command(o.Self, args...)
		cmd.Stdin = bytes.NewBufferString(text)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
}

// RunChild runs scenario text read from r as this process (the -child mode)
// and writes its raw results to w.
func RunChild(o Options, r io.Reader, w io.Writer) error {
	// One thread does every ioctl: the kernel keeps enablers per task, and
	// a task that did not register has none to unregister.
	runtime.LockOSThread()
	text, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	steps, err := Parse(string(text))
	if err != nil {
		return err
	}
	if o.Self == "" {
		if o.Self, err = os.Executable(); err != nil {
			return err
		}
	}
	var p proc
	switch o.Backend {
	case "kernel":
		p, err = newKernelProc(o.spawner())
	case "fuse":
		// A child of the fuse driver is in uetrace run's namespace: the
		// tree is at TracefsRoot, and perf_event_open is not its.
		var k *kernelProc
		if k, err = newKernelProc(o.spawner()); err == nil {
			k.noPerf = true
			p = k
		}
	case "daemon", "daemon-ring":
		p, err = newDaemonProc(o.Socket, o.spawner(), o.Backend == "daemon-ring")
	default:
		return fmt.Errorf("-child runs the kernel, fuse, daemon or daemon-ring backend, not %q", o.Backend)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(runProcess(p, steps))
	return err
}

// startDaemon serves a fresh subsystem, with every caller privileged, on a
// socket in a temporary directory.
func startDaemon() (string, func(), error) {
	dir, err := os.MkdirTemp("", "ueconform-")
	if err != nil {
		return "", nil, err
	}
	sock := filepath.Join(dir, "uetrace.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	srv := daemon.New(daemon.Config{
		Subsystem: subsys.New(subsys.Options{NumCPU: 2}),
		Logger:    slog.New(slog.DiscardHandler),
		Cred:      func(unix.Ucred) subsys.Cred { return root },
	})
	go srv.Serve(ln)
	return sock, func() { srv.Close(); os.RemoveAll(dir) }, nil
}

// cleanup brings a backend back to its state at boot between scenarios:
// every event disabled and deleted (persistent ones by truncating
// dynamic_events, once the kernel's deferred teardown has let go of the
// others), tracing on, the trace buffer empty.
func cleanup(fs fileSystem) error {
	for _, system := range []string{"user_events", "user_events_multi"} {
		names, _ := fs.readDir("events/" + system)
		for _, n := range names {
			p := "events/" + system + "/" + n + "/enable"
			if n != "enable" && fs.exists(p) {
				fs.write(p, unix.O_TRUNC, []byte("0"))
			}
		}
	}
	fs.write("tracing_on", unix.O_TRUNC, []byte("1"))
	var st []byte
	var err error
	if !waitFor(func() bool {
		fs.write("dynamic_events", unix.O_TRUNC, nil)
		st, err = fs.read("user_events_status")
		return err == nil && string(st) == emptyStatus
	}) {
		return fmt.Errorf("events left after %v: %q (%v)", waitLimit, st, err)
	}
	_, err = fs.write("trace", unix.O_TRUNC, nil)
	return err
}
