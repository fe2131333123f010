// Command tracefsgolden records what a real kernel's tracefs files that
// trace-cmd reads say and do — besides the events' own files
// (eventgolden) and the ring buffer's (ftracegolden): trace_clock,
// tracing_cpumask, current_tracer, available_tracers, trace_options,
// buffer_percent, saved_cmdlines, saved_tgids, events/header_page,
// events/header_event, events/ftrace/, and per_cpu/cpuN/ — their modes,
// their text, what writes to them answer and what they change. It runs
// inside the reference kernel VM as root (see TestGoldenMatchesKernel); it
// is a test-data generator, not part of uetrace, and never runs on the
// host.
//
// Regenerating internal/subsys/testdata/kernel-tracefs-files.json:
//
//	go test ./kernel/cmd/tracefsgolden -run TestGoldenMatchesKernel -update
//
// The JSON is printed between the lines "@@TFCAPTURE-JSON-BEGIN@@" and
// "@@TFCAPTURE-JSON-END <sha256>@@" (vmtest.Section). internal/subsys's
// TestTracefsFilesAreTheKernels replays its steps on a subsystem and
// compares every answer.
//
// # Steps
//
// Each step is an op on a path, with its argument and what the kernel
// answered: "stat" (the mode's permission bits, octal), "ls" (the
// directory's entries, "name mode", sorted), "read" (the whole text),
// "write" (Arg written in one write(2) to the file opened O_WRONLY|O_TRUNC,
// as the shell's '>'; Err is the errno), "entries" (the "entries:" line of
// a per_cpu stats file), "tasks" (saved_cmdlines or saved_tgids, only the
// lines of this program's writer threads, their tids written <T0>, <T1>
// and the process id <P>, saved_tgids's sorted so), "reg" (register Arg through DIAG_IOCSREG and
// enable it) and "writes" (Count writes of a u32 0.. from the writer
// thread pinned to CPU, which then sleeps, so that its CPU switches tasks
// and the kernel saves it for saved_cmdlines and saved_tgids).
//
// Nothing recorded depends on time or on the boot: clocks appear only in
// stats, of which only the entries are kept; tids and the pid are masked.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

const (
	beginMarker = "@@TFCAPTURE-JSON-BEGIN@@"
	endMarker   = "@@TFCAPTURE-JSON-END"
	comm        = "tfcapture"
	tracing     = "/sys/kernel/tracing"
	// event is the user event the writes are of.
	event = "tfc u32 n"
)

// Golden is the JSON.
type Golden struct {
	Kernel string  `json:"kernel"`
	NCPU   int     `json:"ncpu"`
	Comm   string  `json:"comm"`
	Steps  []*Step `json:"steps"`
}

// Step is one op and the kernel's answer (see the package doc).
type Step struct {
	Op    string `json:"op"`
	Path  string `json:"path,omitempty"`
	Arg   string `json:"arg,omitempty"`
	CPU   int    `json:"cpu,omitempty"`
	Count int    `json:"count,omitempty"`

	Mode  string   `json:"mode,omitempty"`
	Names []string `json:"names,omitempty"`
	Text  string   `json:"text,omitempty"`
	Err   string   `json:"err,omitempty"`
}

// ftraceEvents are the events of events/ftrace/ whose files are read:
// all of the test kernel's.
var ftraceEvents = []string{"bprint", "bputs", "branch", "context_switch", "func_repeats", "funcgraph_entry",
	"funcgraph_exit", "function", "hwlat", "kernel_stack", "mmiotrace_map", "mmiotrace_rw", "osnoise", "print",
	"raw_data", "timerlat", "user_stack", "wakeup"}

// steps is the capture's plan.
func steps() []*Step {
	var s []*Step
	add := func(op, path, arg string) { s = append(s, &Step{Op: op, Path: path, Arg: arg}) }
	writes := func(cpu, count int) { s = append(s, &Step{Op: "writes", CPU: cpu, Count: count}) }
	entries := func(cpu int) { add("entries", fmt.Sprintf("per_cpu/cpu%d/stats", cpu), "") }

	// As booted, before any event is enabled.
	for _, f := range []string{"trace_clock", "tracing_cpumask", "current_tracer", "available_tracers", "trace_options",
		"buffer_percent", "saved_cmdlines", "saved_tgids", "printk_formats", "events/header_page", "events/header_event",
		"per_cpu/cpu0/buffer_size_kb", "per_cpu/cpu1/buffer_size_kb"} {
		add("stat", f, "")
		if f != "printk_formats" {
			add("read", f, "")
		}
	}
	add("stat", "per_cpu", "")
	add("ls", "per_cpu", "")
	add("ls", "per_cpu/cpu0", "")
	add("ls", "per_cpu/cpu1", "")
	add("ls", "events/ftrace", "")
	for _, ev := range ftraceEvents {
		add("ls", "events/ftrace/"+ev, "")
		add("read", "events/ftrace/"+ev+"/format", "")
		if ev == "function" || ev == "print" {
			add("read", "events/ftrace/"+ev+"/id", "")
		}
	}

	// saved_cmdlines and saved_tgids, as writes fill them.
	add("reg", "", event)
	writes(0, 3)
	writes(1, 2)
	add("tasks", "saved_cmdlines", "")
	add("tasks", "saved_tgids", "")
	add("write", "trace_options", "record-tgid")
	add("read", "trace_options", "")
	writes(0, 1)
	writes(1, 1)
	add("tasks", "saved_tgids", "")
	add("write", "trace_options", "norecord-tgid\n")
	add("write", "trace_options", "  record-cmd  ")
	add("write", "trace_options", "bogus")
	add("write", "trace_options", "test_nop_refuse")
	add("write", "trace_options", "nooverwrite")
	add("read", "trace_options", "")
	add("write", "trace_options", "overwrite")

	// trace_clock: a write of a clock, even the one in use, empties the
	// buffer.
	entries(0)
	add("write", "trace_clock", "mono")
	add("read", "trace_clock", "")
	entries(0)
	writes(0, 1)
	add("write", "trace_clock", " local\n")
	add("read", "trace_clock", "")
	entries(0)
	add("write", "trace_clock", "bogus")
	add("write", "trace_clock", "counter")
	add("read", "trace_clock", "")
	add("write", "trace_clock", "local")

	// tracing_cpumask: CPUs out of it record nothing.
	add("write", "tracing_cpumask", "1")
	add("read", "tracing_cpumask", "")
	writes(0, 2)
	writes(1, 2)
	entries(0)
	entries(1)
	add("write", "tracing_cpumask", "ff")
	add("write", "tracing_cpumask", "1,1")
	add("write", "tracing_cpumask", "g")
	add("write", "tracing_cpumask", "000000002")
	add("write", "tracing_cpumask", ",2\n")
	add("read", "tracing_cpumask", "")
	add("write", "tracing_cpumask", "\n")
	add("read", "tracing_cpumask", "")
	add("write", "tracing_cpumask", "3")
	add("read", "tracing_cpumask", "")

	// current_tracer and buffer_percent.
	add("write", "current_tracer", "nop\n")
	add("write", "current_tracer", "nosuch")
	// Not "function": the kernel takes it, and patching every function's
	// entry under qemu's multi-threaded emulation now and then crashes
	// the guest (an int3 oops in the timer interrupt).
	add("read", "current_tracer", "")
	add("write", "buffer_percent", "101")
	add("write", "buffer_percent", "0")
	add("read", "buffer_percent", "")
	add("write", "buffer_percent", "100\n")
	add("read", "buffer_percent", "")
	add("write", "buffer_percent", "50")

	// A CPU's buffer_size_kb.
	add("write", "per_cpu/cpu1/buffer_size_kb", "100")
	add("read", "per_cpu/cpu1/buffer_size_kb", "")
	add("read", "buffer_size_kb", "")
	add("read", "buffer_total_size_kb", "")
	add("write", "per_cpu/cpu1/buffer_size_kb", "0")
	add("write", "buffer_size_kb", "1408")
	add("read", "buffer_size_kb", "")
	return s
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tracefsgolden:", err)
		os.Exit(1)
	}
}

func run() error {
	var uts unix.Utsname
	unix.Uname(&uts)
	g := &Golden{Kernel: unix.ByteSliceToString(uts.Release[:]), NCPU: runtime.NumCPU(), Comm: comm, Steps: steps()}
	c, err := newCapture()
	if err != nil {
		return err
	}
	for _, s := range g.Steps {
		c.do(s)
	}
	js, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	fmt.Printf("%s\n%s%s %x@@\n", beginMarker, js, endMarker, sha256.Sum256(js))
	return nil
}

type capture struct {
	fd      int     // user_events_data
	word    *uint32 // the enable word
	index   uint32  // the event's write index
	workers []*vmtest.Worker
	pid     int
}

func newCapture() (*capture, error) {
	fd, err := unix.Open(filepath.Join(tracing, "user_events_data"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c := &capture{fd: fd, word: new(uint32), pid: os.Getpid()}
	for cpu := range 2 {
		w, err := vmtest.NewWorker(cpu)
		if err != nil {
			return nil, fmt.Errorf("pinning a thread to CPU %d: %w", cpu, err)
		}
		c.workers = append(c.workers, w)
	}
	return c, nil
}

func errnoName(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return err.Error()
}

func (c *capture) do(s *Step) {
	path := filepath.Join(tracing, s.Path)
	switch s.Op {
	case "stat":
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			s.Err = errnoName(err)
			return
		}
		s.Mode = strconv.FormatUint(uint64(st.Mode&0o7777), 8)
	case "ls":
		ents, err := os.ReadDir(path)
		if err != nil {
			s.Err = errnoName(err)
			return
		}
		for _, e := range ents {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(path, e.Name()), &st); err != nil {
				s.Err = errnoName(err)
				return
			}
			s.Names = append(s.Names, e.Name()+" "+strconv.FormatUint(uint64(st.Mode&0o7777), 8))
		}
		slices.Sort(s.Names)
	case "read":
		b, err := os.ReadFile(path)
		if err != nil {
			s.Err = errnoName(err)
			return
		}
		s.Text = string(b)
	case "write":
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			s.Err = errnoName(err)
			return
		}
		defer unix.Close(fd)
		if _, err := unix.Write(fd, []byte(s.Arg)); err != nil {
			s.Err = errnoName(err)
		}
	case "entries":
		b, err := os.ReadFile(path)
		if err != nil {
			s.Err = errnoName(err)
			return
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "entries:") {
				s.Text = line
			}
		}
	case "tasks":
		b, err := os.ReadFile(path)
		if err != nil {
			s.Err = errnoName(err)
			return
		}
		s.Text = c.ours(s.Path, string(b))
	case "reg":
		r := abi.UserReg{Size: abi.UserRegSize, EnableBit: 31, EnableSize: 4, EnableAddr: uint64(uintptr(unsafe.Pointer(c.word)))}
		if err := abi.RegisterName(c.fd, &r, s.Arg); err != nil {
			s.Err = errnoName(err)
			return
		}
		c.index = r.WriteIndex
		name, _, _ := strings.Cut(s.Arg, " ")
		if err := os.WriteFile(filepath.Join(tracing, "events/user_events", name, "enable"), []byte("1"), 0); err != nil {
			s.Err = errnoName(err)
		}
	case "writes":
		c.workers[s.CPU].Do(func() {
			var rec [8]byte
			binary.NativeEndian.PutUint32(rec[:], c.index)
			for i := range s.Count {
				binary.NativeEndian.PutUint32(rec[4:], uint32(i))
				if _, err := unix.Write(c.fd, rec[:]); err != nil && s.Err == "" {
					s.Err = errnoName(err)
				}
			}
			// The kernel saves the writer for saved_cmdlines and
			// saved_tgids when its CPU next switches tasks: a sleep
			// makes that happen now, before the next step reads them.
			unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
		})
	default:
		s.Err = "unknown op " + s.Op
	}
}

// ours keeps the lines of a saved_cmdlines or saved_tgids text whose pid
// is one of the writer threads', with their tids written <T0> and <T1> and
// a tgid of this process <P>: the kernel also lists other tasks, and ids
// change from boot to boot. saved_tgids's lines, in pid order there, are
// sorted as masked.
func (c *capture) ours(path, text string) string {
	tids := map[string]string{}
	for i, w := range c.workers {
		tids[strconv.Itoa(w.TID)] = "<T" + strconv.Itoa(i) + ">"
	}
	var lines []string
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) != 2 || tids[f[0]] == "" {
			continue
		}
		if path == "saved_tgids" && f[1] == strconv.Itoa(c.pid) {
			f[1] = "<P>"
		}
		lines = append(lines, tids[f[0]]+" "+f[1]+"\n")
	}
	if path == "saved_tgids" {
		slices.Sort(lines)
	}
	return strings.Join(lines, "")
}
