// Command ftracegolden records how a real kernel's ftrace ring buffer and its
// trace, trace_pipe and trace_pipe_raw files behave under user_events
// writes, so that package ftrace can be tested against it. It runs inside
// the reference kernel VM as root (see TestGoldenMatchesKernel); it is a
// test-data generator, not part of uetrace, and never runs on the host.
//
// # Regenerating
//
// TestGoldenMatchesKernel (golden_test.go) builds this program statically,
// runs it in the kernel with package kernel/vmtest, and compares its JSON
// with internal/ftrace/testdata/kernel-ftrace.json; it is part of
// go test ./... when a kernel image and qemu are available (see
// kernel/vmtest). To rewrite the golden file from the kernel's answers:
//
//	go test ./kernel/cmd/ftracegolden -run TestGoldenMatchesKernel -update
//
// On stdout the JSON comes between the marker lines
// "@@FTCAPTURE-JSON-BEGIN@@" and "@@FTCAPTURE-JSON-END <sha256>@@", whose
// SHA-256 the test checks; diagnostics go to stderr. With -o the JSON is
// written to a file instead.
//
// # What it does
//
// The program registers a few user events through DIAG_IOCSREG, enables
// them through their enable files and runs the scenarios listed in
// scenarios(): each is a sequence of steps (writes from a thread pinned to
// CPU 0 or CPU 1, sleeps, tracing_on, O_TRUNC opens of trace, buffer_size_kb
// writes, trace_pipe reads) and observations (the trace file, trace_pipe
// text, per_cpu stats, and the raw sub-buffer pages of trace_pipe_raw, which
// carry every surviving event's exact nanosecond time stamp). Every step is
// written to the JSON with what the kernel answered, so a test can replay
// the same sequence into package ftrace and compare.
//
// Payloads come from a generator (see payload) so that the JSON need not
// carry them: size n and sequence number s give the u32 s in native byte
// order followed by bytes byte(s+i) for i >= 4 (sizes below 4: byte(s+i)).
//
// Writes are made by two worker threads, each locked to its OS thread and
// pinned with sched_setaffinity to one CPU; their tids are the records'
// common_pid. The process names itself "ftcapture"; a warm-up write and a
// sleep on each worker put the comm into saved_cmdlines before the first
// scenario. Registrations, unregistrations and deletes run on the main
// goroutine, locked to the process's first thread: the kernel keeps
// enablers per task (current->user_event_mm, shared only with threads
// created after the first registration), so DIAG_IOCSUNREG from another
// thread of the same process answers ENOENT.
//
// # Time gaps
//
// Whether a time extend stands before a record is part of the golden, and
// the ring buffer puts one when the gap since the CPU's previous record
// exceeds 2^27 ns (~134 ms): the scenarios' sleeps make the gaps that must
// have one, and every other gap must stay shorter. A loaded host emulating
// the VM without KVM stalls vCPUs past that between two back-to-back writes
// (seen: 135 ms to 1.4 s, in every scenario of thousands of writes, at a
// load average of 10 on 2 cores), so the test boots the guest on a virtual
// clock (vmtest.Options.VirtualClock: guest time counts the instructions it
// runs, and stands still while the host does not run it). As a guard, after
// each scenario the capture still checks every gap against its
// plan with CLOCK_MONOTONIC read around each write (checkGaps) and runs the
// scenario again, from the buffer sizes and tracing_on it started with,
// when one fell on the wrong side (up to attempts times). Only a run that
// kept its plan is written; stderr says which gap made each re-run and how
// many there were. The last scenario registers, deletes and closes, which
// cannot be undone in a boot: when its gaps fail, the capture prints
// rerunMarker instead of the JSON and the test boots again. The pages'
// own time stamps and extends are then held against the same plan
// (checkPages); a disagreement there is not load, and the test fails.
//
// Writes cannot move between CPUs: each worker thread is pinned with
// sched_setaffinity before its first write, and the kernel reserves the
// record on the CPU the writing thread runs on.
//
// # Output
//
// JSON (two-space indent): the kernel release, the CPU count, the comm,
// trace_clock, buffer_size_kb at boot and after the first enable, the
// events registered at start with their type ids, and per scenario its
// steps. A step has its op and arguments; writes add the writer's tid,
// "mono" (CLOCK_MONOTONIC in ns before the first write, then the
// differences between successive writes), "n" (each write's return, -1 on
// error) and "errno"; observations add "text" (or "text_b64" when the text
// is not valid UTF-8), "chunks" (the sizes successive read(2)s returned)
// and "pages" (trace_pipe_raw pages in base64, trailing zeros cut); "err"
// is the errno of a control step.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

const (
	// Marker lines around the JSON, as vmtest.Section reads them (section
	// "FTCAPTURE-JSON"; the end marker carries the JSON's SHA-256).
	beginMarker = "@@FTCAPTURE-JSON-BEGIN@@"
	endMarker   = "@@FTCAPTURE-JSON-END"
	comm        = "ftcapture"
)

type golden struct {
	Kernel       string      `json:"kernel"`
	NCPU         int         `json:"ncpu"`
	Comm         string      `json:"comm"`
	TraceClock   string      `json:"trace_clock"`
	BootSizeKB   string      `json:"boot_buffer_size_kb"`
	EnableSizeKB string      `json:"enabled_buffer_size_kb"`
	Events       []*eventOut `json:"events"`
	Scenarios    []*scenario `json:"scenarios"`
}

type eventOut struct {
	Cmd  string `json:"cmd"`
	Name string `json:"name"`
	ID   int    `json:"id"`
}

type scenario struct {
	Name  string  `json:"name"`
	Doc   string  `json:"doc"`
	Steps []*step `json:"steps"`
}

// step is one action and what the kernel answered.
type step struct {
	Op string `json:"op"`

	// Op "write" (Count writes of Event from CPU, payload sizes Size, sequence
	// numbers Seq, Seq+1, ...) or "write_hex" (one write of Hex).
	Event string  `json:"event,omitempty"`
	CPU   *int    `json:"cpu,omitempty"`
	Size  int     `json:"size,omitempty"`
	Seq   uint32  `json:"seq,omitempty"`
	Count int     `json:"count,omitempty"`
	Hex   string  `json:"hex,omitempty"`
	TID   int     `json:"tid,omitempty"`
	Mono  []int64 `json:"mono,omitempty"` // CLOCK_MONOTONIC ns before the first write, then the differences between successive writes
	N     []int   `json:"n,omitempty"`    // each write's return value (-1 on error)
	Errno string  `json:"errno,omitempty"`

	// Arguments of control steps.
	Arg string `json:"arg,omitempty"`
	MS  int    `json:"ms,omitempty"`

	// Observations.
	Text   string   `json:"text,omitempty"`
	TextB  string   `json:"text_b64,omitempty"` // Text in base64 when it is not valid UTF-8 (Text is then empty)
	Chunks []int    `json:"chunks,omitempty"`   // sizes returned by successive read(2)s
	Pages  []string `json:"pages,omitempty"`    // trace_pipe_raw pages, base64, trailing zeros cut
	Err    string   `json:"err,omitempty"`

	// at is, for each write, CLOCK_MONOTONIC just before and just after
	// it: what checkGaps needs, not part of the golden.
	at [][2]int64
}

func intp(i int) *int { return &i }

func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var e unix.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return err.Error()
}

// payload is the generator described in the package comment.
func payload(size int, seq uint32) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(seq + uint32(i))
	}
	if size >= 4 {
		binary.NativeEndian.PutUint32(b, seq)
	}
	return b
}

type tracefs string

func (t tracefs) path(rel string) string { return filepath.Join(string(t), rel) }

// settle bounds the waits for 6.12.117's deferred teardown: usually
// milliseconds, but a loaded machine emulating the VM without KVM can take
// seconds, and a step run before it is done would change the golden. A wait
// ends as soon as its condition holds.
const settle = time.Minute

// waitGone polls until rel no longer exists, for at most d.
func (t tracefs) waitGone(rel string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(t.path(rel)); os.IsNotExist(err) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (t tracefs) read(rel string) string {
	b, err := os.ReadFile(t.path(rel))
	if err != nil {
		return "ERROR: " + errnoName(err)
	}
	return string(b)
}

func (t tracefs) write(rel, s string, flags int) error {
	fd, err := unix.Open(t.path(rel), unix.O_WRONLY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if s == "" {
		return nil
	}
	_, err = unix.Write(fd, []byte(s))
	return err
}

type gen struct {
	t     tracefs
	fd    int
	word  *uint32
	index map[string]uint32
	bits  map[string]uint8 // reg_only registrations: name -> enable bit
	// unregistered: reg_only registrations dropped since the last
	// close_reopen, whose events the close may let go.
	unregistered map[string]bool
	persist      map[string]bool // events created through dynamic_events
	nextBit      uint8
	workers      []*vmtest.Worker
	g            *golden
	pages        pageStats // what checkPages compared, over the scenarios emitted
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func (g *gen) register(cmd string, bit uint8) error {
	r := abi.UserReg{
		Size:       abi.UserRegSize,
		EnableBit:  bit,
		EnableSize: 4,
		EnableAddr: uint64(uintptr(unsafe.Pointer(g.word))),
	}
	if err := abi.RegisterName(g.fd, &r, cmd); err != nil {
		return fmt.Errorf("register %q: %w", cmd, err)
	}
	name, _, _ := strings.Cut(cmd, " ")
	g.index[name] = r.WriteIndex
	if err := g.t.write("events/user_events/"+name+"/enable", "1", 0); err != nil {
		return fmt.Errorf("enable %s: %w", name, err)
	}
	id, _ := strconv.Atoi(strings.TrimSpace(g.t.read("events/user_events/" + name + "/id")))
	g.g.Events = append(g.g.Events, &eventOut{Cmd: cmd, Name: name, ID: id})
	return nil
}

// writeRaw writes [index][p] from the calling thread.
func (g *gen) writeRaw(fd int, idx uint32, p []byte) (int, error) {
	var hdr [4]byte
	binary.NativeEndian.PutUint32(hdr[:], idx)
	iov := [][]byte{hdr[:]}
	if len(p) > 0 {
		iov = append(iov, p)
	}
	return unix.Writev(fd, iov)
}

// writes runs s (a "write" or "write_hex" step) on its CPU's worker.
func (g *gen) writes(s *step) {
	w := g.workers[*s.CPU]
	s.TID = w.TID
	idx, ok := g.index[s.Event]
	if !ok {
		s.Errno = "unknown event " + s.Event
		return
	}
	var ps [][]byte
	if s.Op == "write_hex" {
		var p []byte
		fmt.Sscanf(s.Hex, "%x", &p)
		ps = append(ps, p)
	} else {
		for i := 0; i < s.Count; i++ {
			ps = append(ps, payload(s.Size, s.Seq+uint32(i)))
		}
	}
	s.Mono = make([]int64, len(ps))
	s.N = make([]int, len(ps))
	s.at = make([][2]int64, len(ps))
	w.Do(func() {
		var last int64
		for i, p := range ps {
			now := monoNow()
			s.Mono[i] = now - last
			last = now
			n, err := g.writeRaw(g.fd, idx, p)
			s.at[i] = [2]int64{now, monoNow()}
			if err != nil {
				n = -1
				if s.Errno == "" {
					s.Errno = errnoName(err)
				}
			}
			s.N[i] = n
		}
	})
}

// readPipe reads trace_pipe with O_NONBLOCK in read(2)s of size bufSize
// until EAGAIN, or only maxReads reads when maxReads > 0.
func (g *gen) readPipe(s *step, bufSize, maxReads int) {
	rel := "trace_pipe"
	if s.CPU != nil {
		rel = fmt.Sprintf("per_cpu/cpu%d/trace_pipe", *s.CPU)
	}
	fd, err := unix.Open(g.t.path(rel), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		s.Err = errnoName(err)
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, bufSize)
	var out []byte
	for i := 0; maxReads == 0 || i < maxReads; i++ {
		n, err := unix.Read(fd, buf)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				s.Err = errnoName(err)
			}
			break
		}
		if n == 0 {
			s.Err = "EOF"
			break
		}
		s.Chunks = append(s.Chunks, n)
		out = append(out, buf[:n]...)
	}
	s.Text = string(out)
}

// readRaw reads every page trace_pipe_raw of cpu gives until EAGAIN.
func (g *gen) readRaw(s *step, cpu int) {
	fd, err := unix.Open(g.t.path(fmt.Sprintf("per_cpu/cpu%d/trace_pipe_raw", cpu)), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		s.Err = errnoName(err)
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				s.Err = errnoName(err)
			}
			return
		}
		if n == 0 {
			return
		}
		s.Chunks = append(s.Chunks, n)
		s.Pages = append(s.Pages, base64.StdEncoding.EncodeToString(bytes.TrimRight(buf[:n], "\x00")))
	}
}

func (g *gen) run(sc *scenario) {
	for _, s := range sc.Steps {
		switch s.Op {
		case "write", "write_hex":
			g.writes(s)
		case "sleep":
			time.Sleep(time.Duration(s.MS) * time.Millisecond)
		case "trunc": // open trace with O_TRUNC: clears the buffers
			if err := g.t.write("trace", "", unix.O_TRUNC); err != nil {
				s.Err = errnoName(err)
			}
		case "tracing_on", "buffer_size_kb":
			if err := g.t.write(s.Op, s.Arg, 0); err != nil {
				s.Err = errnoName(err)
			}
		case "cpu_buffer_size_kb":
			if err := g.t.write(fmt.Sprintf("per_cpu/cpu%d/buffer_size_kb", *s.CPU), s.Arg, 0); err != nil {
				s.Err = errnoName(err)
			}
		case "read": // any tracefs file
			s.Text = g.t.read(s.Arg)
		case "trace":
			s.Text = g.t.read("trace")
		case "stats":
			s.Text = g.t.read(fmt.Sprintf("per_cpu/cpu%d/stats", *s.CPU))
		case "pipe":
			size, reads := 65536, 0
			if s.Size > 0 {
				size = s.Size
			}
			if s.Count > 0 {
				reads = s.Count
			}
			g.readPipe(s, size, reads)
		case "pipe2": // two readers at once, each reading until EAGAIN
			g.pipe2(s)
		case "raw":
			g.readRaw(s, *s.CPU)
		case "dyn": // append a line to dynamic_events
			if err := g.t.write("dynamic_events", s.Arg, unix.O_APPEND); err != nil {
				s.Err = errnoName(err)
			} else if rest, ok := strings.CutPrefix(s.Arg, "u:"); ok {
				name, _, _ := strings.Cut(rest, " ")
				g.persist[name] = true
			}
		case "register": // register and enable Arg on the shared fd
			if err := g.register(s.Arg, 30); err != nil {
				s.Err = err.Error()
			}
		case "reg_only": // register without enabling, with a fresh enable bit; Text is the type id
			g.regOnly(s)
		case "enable", "disable":
			v := "1"
			if s.Op == "disable" {
				v = "0"
			}
			if err := g.t.write("events/user_events/"+s.Arg+"/enable", v, 0); err != nil {
				s.Err = errnoName(err)
			}
		case "unreg":
			g.unreg(s)
		case "pipe_busy":
			g.pipeBusy(s)
		case "close_reopen": // close the shared fd (dropping its registrations) and open a new one
			unix.Close(g.fd)
			// The events only this fd held — unregistered, not persistent
			// — go, after 6.12.117's deferred teardown: wait for it, so
			// that the next event's type ID does not depend on how quickly
			// it came. (Events whose enablers remain stay.)
			for name := range g.unregistered {
				if !g.persist[name] {
					g.t.waitGone("events/user_events/"+name, settle)
				}
			}
			clear(g.unregistered)
			// Then a gap the ring buffer sees: the golden was captured with
			// one of seconds here, and a gap over 2^27 ns puts a time extend
			// before the next record of a CPU, which the pages show. Longer
			// (a slow machine) changes nothing; shorter might.
			time.Sleep(closeReopenMS * time.Millisecond)
			fd, err := unix.Open(g.t.path("user_events_data"), unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				s.Err = errnoName(err)
			}
			g.fd = fd
			g.index = map[string]uint32{}
		case "iocsdel":
			var err error
			deadline := time.Now().Add(settle)
			for {
				err = abi.Delete(g.fd, s.Arg)
				if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			s.Err = errnoName(err)
		default:
			s.Err = "unknown op " + s.Op
		}
	}
}

// closeReopenMS is the sleep of close_reopen.
const closeReopenMS = 2000

func (g *gen) regOnly(s *step) {
	bit := g.nextBit
	g.nextBit--
	r := abi.UserReg{
		Size:       abi.UserRegSize,
		EnableBit:  bit,
		EnableSize: 4,
		EnableAddr: uint64(uintptr(unsafe.Pointer(g.word))),
	}
	if err := abi.RegisterName(g.fd, &r, s.Arg); err != nil {
		s.Err = errnoName(err)
		return
	}
	name, _, _ := strings.Cut(s.Arg, " ")
	g.index[name] = r.WriteIndex
	g.bits[name] = bit
	s.Text = strings.TrimSpace(g.t.read("events/user_events/" + name + "/id"))
}

// unreg drops the reg_only registration of s.Arg (DIAG_IOCSUNREG).
func (g *gen) unreg(s *step) {
	bit, ok := g.bits[s.Arg]
	if !ok {
		s.Err = "not registered with reg_only"
		return
	}
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: bit, DisableAddr: uint64(uintptr(unsafe.Pointer(g.word)))}
	if err := abi.Unregister(g.fd, &u); err != nil {
		s.Err = errnoName(err)
	}
	delete(g.bits, s.Arg)
	g.unregistered[s.Arg] = true
}

// pipeBusy opens per_cpu/cpu0/trace_pipe and, while it is open, tries
// trace_pipe, per_cpu/cpu0/trace_pipe and per_cpu/cpu1/trace_pipe; Text
// lists each open's errno ("" when it succeeded).
func (g *gen) pipeBusy(s *step) {
	open := func(rel string) (int, string) {
		fd, err := unix.Open(g.t.path(rel), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return fd, errnoName(err)
	}
	var out []string
	var fds []int
	for _, rel := range []string{"per_cpu/cpu0/trace_pipe", "trace_pipe", "per_cpu/cpu0/trace_pipe", "per_cpu/cpu1/trace_pipe"} {
		fd, e := open(rel)
		out = append(out, rel+"="+e)
		if e == "" {
			fds = append(fds, fd)
		}
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	fd, e := open("trace_pipe")
	out = append(out, "trace_pipe after closing="+e)
	if e == "" {
		fd2, e2 := open("trace_pipe")
		out = append(out, "second trace_pipe="+e2)
		if e2 == "" {
			unix.Close(fd2)
		}
		fd3, e3 := open("per_cpu/cpu1/trace_pipe")
		out = append(out, "per_cpu/cpu1/trace_pipe="+e3)
		if e3 == "" {
			unix.Close(fd3)
		}
		unix.Close(fd)
	}
	s.Text = strings.Join(out, "\n") + "\n"
}

// pipe2 runs two readers at once, one per worker thread, each reading
// 256-byte chunks until EAGAIN: of trace_pipe when s.Arg is "all", else
// of per_cpu/cpu0/trace_pipe and per_cpu/cpu1/trace_pipe. The two outputs
// are joined with a line "@@SPLIT@@"; Err joins their errors.
func (g *gen) pipe2(s *step) {
	var wg sync.WaitGroup
	out := make([]*step, 2)
	for i := range out {
		out[i] = &step{}
		if s.Arg != "all" {
			out[i].CPU = intp(i)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			g.workers[i].Do(func() { g.readPipe(out[i], 256, 0) })
		}(i)
	}
	wg.Wait()
	s.Text = out[0].Text + "@@SPLIT@@\n" + out[1].Text
	if out[0].Err != "" || out[1].Err != "" {
		s.Err = out[0].Err + "," + out[1].Err
	}
}

func init() {
	// Keep main on the process's first thread: the kernel keeps
	// user_events enablers per task (current->user_event_mm), so an
	// unregister from another thread of the process would not find them.
	runtime.LockOSThread()
}

func main() {
	tfs := flag.String("tracefs", "/sys/kernel/tracing", "tracefs mount point")
	outPath := flag.String("o", "", "write the JSON to this file instead of between markers on stdout")
	flag.Parse()
	if err := run(tracefs(*tfs), *outPath); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

func run(t tracefs, outPath string) error {
	name := []byte(comm + "\x00")
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NAME): %w", err)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	g := &gen{t: t, index: map[string]uint32{}, bits: map[string]uint8{}, unregistered: map[string]bool{}, persist: map[string]bool{}, nextBit: 24, g: &golden{Comm: comm}}
	g.g.Kernel = unix.ByteSliceToString(uts.Release[:])
	g.g.NCPU = runtime.NumCPU()
	g.g.TraceClock = strings.TrimSpace(t.read("trace_clock"))
	g.g.BootSizeKB = t.read("buffer_size_kb")
	if g.g.NCPU < 2 {
		return fmt.Errorf("need 2 CPUs, have %d", g.g.NCPU)
	}

	// The enable word lives in an mmap'ed page so that it never moves.
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	g.word = (*uint32)(unsafe.Pointer(&mem[0]))
	g.fd, err = unix.Open(t.path("user_events_data"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for cpu := 0; cpu < 2; cpu++ {
		w, err := vmtest.NewWorker(cpu)
		if err != nil {
			return fmt.Errorf("worker on CPU %d: %w", cpu, err)
		}
		g.workers = append(g.workers, w)
	}
	for i, cmd := range eventCmds {
		if err := g.register(cmd, uint8(31-i)); err != nil {
			return err
		}
	}
	g.g.EnableSizeKB = t.read("buffer_size_kb")

	// Warm up: one traced write and a sleep on each worker, so that both
	// tids' comms are in saved_cmdlines; then clear the buffer.
	for _, w := range g.workers {
		w.Do(func() {
			g.writeRaw(g.fd, g.index["ovw"], payload(4, 0))
			time.Sleep(20 * time.Millisecond)
		})
	}
	if err := t.write("trace", "", unix.O_TRUNC); err != nil {
		return err
	}

	enabled := initialEnabled()
	reruns := 0
	for i := range scenarios() {
		sc, n, err := g.runChecked(i, enabled)
		reruns += n
		var ge *gapError
		if errors.As(err, &ge) && !rerunnable(sc) {
			// Its registrations, deletes and closes cannot be undone
			// in this boot; a fresh one can run it again.
			fmt.Fprintf(os.Stderr, "capture: %v\n", err)
			fmt.Printf("%s %s\n", rerunMarker, sc.Name)
			return nil
		}
		if err != nil {
			return err
		}
		for _, s := range sc.Steps {
			if s.Err == "" && (s.Op == "enable" || s.Op == "disable") {
				enabled[s.Arg] = s.Op == "enable"
			}
		}
		for _, s := range sc.Steps {
			if !utf8.ValidString(s.Text) {
				s.TextB = base64.StdEncoding.EncodeToString([]byte(s.Text))
				s.Text = ""
			}
		}
		g.g.Scenarios = append(g.g.Scenarios, sc)
		for _, s := range sc.Steps {
			if s.Err != "" && s.Op != "pipe2" {
				fmt.Fprintf(os.Stderr, "capture: %s: %s: %s\n", sc.Name, s.Op, s.Err)
			}
			if s.Errno != "" {
				fmt.Fprintf(os.Stderr, "capture: %s: %s: errno %s\n", sc.Name, s.Op, s.Errno)
			}
		}
	}

	fmt.Fprintf(os.Stderr, "capture: %d scenario re-runs for gaps on the wrong side of 2^27 ns; the pages agree with the gap check on %d pairs of records, %d with a time extend\n",
		reruns, g.pages.pairs, g.pages.extends)

	js, err := encode(g.g)
	if err != nil {
		return err
	}
	if outPath != "" {
		return os.WriteFile(outPath, js, 0o644)
	}
	sum := sha256.Sum256(js)
	var o bytes.Buffer
	o.WriteString(beginMarker + "\n")
	o.Write(js)
	fmt.Fprintf(&o, "%s %x@@\n", endMarker, sum)
	_, err = os.Stdout.Write(o.Bytes())
	return err
}

// rerunMarker is the line the capture prints, instead of the JSON, when a
// scenario that cannot run twice in one boot (rerunnable) ran with a gap on
// the wrong side of 2^27 ns: the test then boots the VM again.
const rerunMarker = "@@FTCAPTURE-RERUN@@"

// rerunnable reports whether sc can run again in the same boot with the
// same result: it changes nothing but the ring buffer (which its first
// step, an O_TRUNC open of trace, clears), the buffer sizes and tracing_on
// (which runChecked puts back). Registering, unregistering, deleting and
// closing the fd change type ids and the events' existence for good.
func rerunnable(sc *scenario) bool {
	cleared := false
	for _, s := range sc.Steps {
		switch s.Op {
		case "trunc":
			cleared = true
		case "read", "trace", "stats", "pipe", "pipe2", "raw", "pipe_busy":
			// Observations before the clear see what an earlier
			// scenario left: only the sizes may be read there.
			if !cleared && !(s.Op == "read" && strings.HasPrefix(s.Arg, "buffer_")) {
				return false
			}
		case "dyn", "register", "reg_only", "unreg", "close_reopen", "iocsdel", "enable", "disable":
			return false
		default:
			if !cleared {
				return false
			}
		}
	}
	return cleared
}

// runChecked runs scenario i of scenarios() until checkGaps passes, at
// most attempts times, each time from the buffer sizes and tracing_on it
// started with; it returns the last run and how many re-runs it took.
// enabled is which events are enabled when it starts.
func (g *gen) runChecked(i int, enabled map[string]bool) (*scenario, int, error) {
	var sizes [2]string
	for cpu := range sizes {
		sizes[cpu] = g.t.read(fmt.Sprintf("per_cpu/cpu%d/buffer_size_kb", cpu))
	}
	tracingOn := g.t.read("tracing_on")
	for n := 0; ; n++ {
		if n > 0 {
			for cpu, kb := range sizes {
				rel := fmt.Sprintf("per_cpu/cpu%d/buffer_size_kb", cpu)
				if g.t.read(rel) != kb {
					if err := g.t.write(rel, strings.Fields(kb)[0], 0); err != nil {
						return nil, n, fmt.Errorf("restore %s to %q: %w", rel, kb, err)
					}
				}
			}
			if g.t.read("tracing_on") != tracingOn {
				if err := g.t.write("tracing_on", strings.TrimSpace(tracingOn), 0); err != nil {
					return nil, n, fmt.Errorf("restore tracing_on to %q: %w", tracingOn, err)
				}
			}
		}
		sc := scenarios()[i]
		g.run(sc)
		err := checkGaps(sc, enabled)
		if err == nil {
			bad, st, err := checkPages(sc, enabled)
			for _, b := range bad {
				fmt.Fprintln(os.Stderr, pagesDisagree, b)
			}
			g.pages.pairs += st.pairs
			g.pages.extends += st.extends
			return sc, n, err
		}
		if !rerunnable(sc) || n+1 >= attempts {
			return sc, n, fmt.Errorf("after %d runs: %w", n+1, err)
		}
		fmt.Fprintf(os.Stderr, "capture: re-running %s (run %d): %v\n", sc.Name, n+2, err)
	}
}

// encode is the golden file's form: JSON with a two-space indent and a
// final newline.
func encode(g *golden) ([]byte, error) {
	js, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(js, '\n'), nil
}
