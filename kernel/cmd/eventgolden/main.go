// Command eventgolden captures how a real kernel's user_events parse,
// describe and print events, so that package eventdef can be tested byte
// for byte against it. It is a test-data generator run inside the
// reference kernel VM as root; it is not part of uetrace and never runs on
// the host (whose kernel has no user_events).
//
// # Regenerating
//
// TestGoldenMatchesKernel (golden_test.go) builds this program statically,
// boots the kernel with package kernel/vmtest, runs
//
//	eventgolden -cases kernel-cases.txt
//
// there with eventdef/testdata/kernel-cases.txt, and compares the JSON with
// eventdef/testdata/kernel-golden.json; it is part of go test ./... when a
// kernel image and qemu are available (see kernel/vmtest). To rewrite the
// golden file from the kernel's answers:
//
//	go test ./kernel/cmd/eventgolden -run TestGoldenMatchesKernel -update
//
// On stdout the JSON comes between the marker lines
// "@@EVENTGOLDEN-JSON-BEGIN@@" and "@@EVENTGOLDEN-JSON-END <sha256>@@",
// whose SHA-256 the test checks; diagnostics go to stderr. With -o the JSON
// is written to a file instead.
//
// # Input
//
// The case file has one directive per line; blank lines and lines starting
// with # are ignored. Strings are Go-quoted (strconv.Unquote), so trailing
// spaces, tabs and newlines are explicit, and must be valid UTF-8.
//
//	case "<cmd>" [flags=N]
//	    Register <cmd> (name_args of DIAG_IOCSREG: "name fields", no "u:")
//	    with struct user_reg.flags N (default 0), and, for flags 0, create
//	    "u:<cmd>" through dynamic_events.
//	write <hex>|-
//	    After a case: one payload (the bytes after the 4-byte write index)
//	    written while the event is enabled by ftrace: groups of hex digits
//	    separated by spaces, each optionally followed by *N to repeat it N
//	    times ("41 00*3" is 41 00 00 00); "-" is the empty payload. Several
//	    are allowed.
//	match "<first>" "<second>" [flags=N] [flags2=M]
//	    On one fd register <first> (bit 31) with flags N, then <second>
//	    (bit 30) with flags M (default N); the result is <second>'s errno.
//	delete "<create>" "<line>"
//	    Create "u:<create>" through dynamic_events, then write <line> (for
//	    example "!u:name u32 a") to dynamic_events; the result is its errno.
//
// # Output
//
// Indented JSON (two spaces), in input order:
//
//	{
//	  "kernel": "6.12.117",        uname -r in the VM
//	  "cases": [{
//	    "line": 12,                line in the case file
//	    "cmd": "__t u8 a",
//	    "flags": 0,
//	    "ioctl_errno": "",         "" on success, else the errno symbol ("EINVAL")
//	    "ioctl_ret": N,            only when the ioctl returned a non-zero value
//	                               that is not an errno (the struct-size quirk)
//	    "write_index": 0,          only when the ioctl succeeded
//	    "event_dir": "events/user_events/__t",   "" when not found (see "note")
//	    "note": "...",             why something could not be captured
//	    "format": "...",           the event's format file after the ioctl; "" if
//	                               the ioctl failed or the directory was not found
//	    "dynamic_events": "u:__t u8 a",   dynamic_events after the ioctl, without
//	                               its final \n (the VM has no other dynamic
//	                               events, so these are the u: lines)
//	    "status": "__t\n\nActive: 1\nBusy: 0\n",   user_events_status then
//	    "enable_word": [0, 2147483648, 0, 0],   the u32 at enable_addr after
//	                               register, enable, disable and unregister
//	                               (only for cases with writes)
//	    "writes": [{
//	      "payload": "41",         hex, without the write index
//	      "errno": "",             of the writev of [index][payload]
//	      "n": 5,                  bytes written, -1 on error
//	      "trace": "...",          the trace file after this write (the buffer is
//	                               cleared before each write) without its "#"
//	                               header and final \n: full ftrace lines, prefix
//	                               included; "" if nothing was recorded
//	      "trace_hex": "..."       the same bytes in hex, only when "trace" is not
//	                               valid UTF-8 (JSON would alter them)
//	    }],
//	    "dyn_errno": "",           writing "u:"+cmd to dynamic_events (O_APPEND,
//	                               no newline); only for flags 0
//	    "dyn_ret": N,              only when that write succeeded with a count
//	                               other than the length written
//	    "dyn_skipped": true,       flags != 0: the dynamic_events step was skipped
//	    "dyn_format": "...",       the format file after the dynamic_events create,
//	                               ONLY when it differs from "format"
//	    "dyn_dynamic_events": "...", dynamic_events after the create, ONLY when
//	                               it differs from "dynamic_events"
//	  }],
//	  "matches": [{"line": 1, "first": "...", "second": "...", "flags": 0, "flags2": 0,
//	    "first_errno": "...",      only when the first registration failed (then
//	                               the second is not attempted and errno is "")
//	    "errno": "EADDRINUSE",
//	    "status": "..."}],         user_events_status with both registered
//	  "deletes": [{"line": 1, "create": "...", "line_text": "!u:x u32 a",
//	    "create_errno": "",        only when the create failed
//	    "errno": "",
//	    "before": "u:x u32 a",     dynamic_events before the delete
//	    "after": ""}]              and after it
//	}
//
// # Procedure
//
// Every directive starts from a kernel with no user event (user_events_status
// "Active: 0") and ends by restoring that state. A case opens
// user_events_data, registers with enable_size 4, bit 31 and an enable word
// in an mmap'ed page, records the format, dynamic_events and status, enables
// the event through its enable file, does the writes (clearing the trace
// buffer before each one), disables, unregisters, closes, and polls (1 ms
// steps, up to 2 s) until the event is gone: 6.12.117 drops an unregistered
// enabler's reference only after an RCU grace period. Persistent events are removed
// with an O_TRUNC open of dynamic_events, retried while it reports EBUSY.
// Anything left over is reported on stderr.
//
// The process pins itself to CPU 0, runs with GOMAXPROCS(1) on its locked
// main thread and names itself "eventgolden", so the trace prefix is
// "eventgolden-<pid> [000] ....."; the pid (47 or 48 so far), the
// timestamps (and with them the prefix's padding) and the need-resched flag
// (the second of the five, "." or "N") vary between boots and are recorded
// raw; TestGoldenMatchesKernel masks them. A warm-up write before the first
// case gets the comm into saved_cmdlines; otherwise the first record would
// show as "<...>".
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
)

// Marker lines around the JSON on stdout, as vmtest.Section reads them
// (section "EVENTGOLDEN-JSON"): the end marker carries the JSON's SHA-256,
// "<endMarker> <hex>@@".
const (
	beginMarker = "@@EVENTGOLDEN-JSON-BEGIN@@"
	endMarker   = "@@EVENTGOLDEN-JSON-END"
)

type golden struct {
	Kernel  string      `json:"kernel"`
	Cases   []*caseOut  `json:"cases"`
	Matches []*matchOut `json:"matches"`
	Deletes []*delOut   `json:"deletes"`
}

type caseOut struct {
	Line             int         `json:"line"`
	Cmd              string      `json:"cmd"`
	Flags            uint16      `json:"flags"`
	IoctlErrno       string      `json:"ioctl_errno"`
	IoctlRet         int64       `json:"ioctl_ret,omitempty"`
	WriteIndex       *uint32     `json:"write_index,omitempty"`
	EventDir         string      `json:"event_dir"`
	Note             string      `json:"note,omitempty"`
	Format           string      `json:"format"`
	DynamicEvents    string      `json:"dynamic_events"`
	Status           string      `json:"status"`
	EnableWord       []uint32    `json:"enable_word,omitempty"`
	Writes           []*writeOut `json:"writes,omitempty"`
	DynErrno         string      `json:"dyn_errno"`
	DynRet           int64       `json:"dyn_ret,omitempty"`
	DynSkipped       bool        `json:"dyn_skipped,omitempty"`
	DynFormat        *string     `json:"dyn_format,omitempty"`
	DynDynamicEvents *string     `json:"dyn_dynamic_events,omitempty"`
}

type writeOut struct {
	Payload  string `json:"payload"`
	Errno    string `json:"errno"`
	N        int    `json:"n"`
	Trace    string `json:"trace"`
	TraceHex string `json:"trace_hex,omitempty"`
}

type matchOut struct {
	Line       int    `json:"line"`
	First      string `json:"first"`
	Second     string `json:"second"`
	Flags      uint16 `json:"flags"`
	Flags2     uint16 `json:"flags2"`
	FirstErrno string `json:"first_errno,omitempty"`
	Errno      string `json:"errno"`
	Status     string `json:"status"`
}

type delOut struct {
	Line        int    `json:"line"`
	Create      string `json:"create"`
	LineText    string `json:"line_text"`
	CreateErrno string `json:"create_errno,omitempty"`
	Errno       string `json:"errno"`
	Before      string `json:"before"`
	After       string `json:"after"`
}

func init() {
	// Keep main on the process's first thread, so every write comes from
	// the task whose tid is the pid.
	runtime.LockOSThread()
}

// settle bounds the waits for the kernel's deferred teardown between cases: it
// usually takes milliseconds, but a loaded machine emulating the VM without
// KVM can take seconds, and a case run before the last one is clean would
// change the golden. A wait ends as soon as the kernel is clean.
const settle = time.Minute

// gen holds what all directives share.
type gen struct {
	t      tracefs
	word   *uint32 // enable word, in an mmap'ed page off the Go heap
	addr   uint64
	trace  traceReader
	maxGap time.Duration // longest wait for an event to go away
	leaks  int
}

func main() {
	casesPath := flag.String("cases", "kernel-cases.txt", "case file")
	tfs := flag.String("tracefs", "/sys/kernel/tracing", "tracefs mount point")
	out := flag.String("o", "", "write the JSON to this file instead of between markers on stdout")
	flag.Parse()
	if err := run(*casesPath, tracefs(*tfs), *out); err != nil {
		fmt.Fprintln(os.Stderr, "eventgolden:", err)
		os.Exit(1)
	}
}

func run(casesPath string, t tracefs, outPath string) error {
	runtime.GOMAXPROCS(1)
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintln(os.Stderr, "eventgolden: sched_setaffinity:", err)
	}
	name := []byte("eventgolden\x00")
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "eventgolden: prctl(PR_SET_NAME):", err)
	}

	f, err := os.Open(casesPath)
	if err != nil {
		return err
	}
	dirs, err := parseCases(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", casesPath, err)
	}

	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	g := &gen{t: t, word: (*uint32)(unsafe.Pointer(&page[0]))}
	g.addr = uint64(uintptr(unsafe.Pointer(g.word)))
	g.trace.t = t

	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	res := &golden{
		Kernel:  unix.ByteSliceToString(uts.Release[:]),
		Cases:   []*caseOut{},
		Matches: []*matchOut{},
		Deletes: []*delOut{},
	}
	if _, err := os.Stat(t.path("user_events_data")); err != nil {
		return fmt.Errorf("no user_events here: %w", err)
	}
	if !t.clean() {
		fmt.Fprintln(os.Stderr, "eventgolden: user events exist at start; deleting them")
		g.restore()
	}
	if err := g.warmUp(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	g.settle(false)

	start := time.Now()
	for _, d := range dirs {
		switch d.kind {
		case "case":
			res.Cases = append(res.Cases, g.runCase(d))
		case "match":
			res.Matches = append(res.Matches, g.runMatch(d))
		case "delete":
			res.Deletes = append(res.Deletes, g.runDelete(d))
		}
		if !t.clean() {
			g.leaks++
			fmt.Fprintf(os.Stderr, "eventgolden: line %d: user events left over:\n%s", d.line, t.read("user_events_status"))
			g.restore()
		}
	}
	fmt.Fprintf(os.Stderr, "eventgolden: %d cases, %d matches, %d deletes in %v; longest teardown wait %v; %d leftovers\n",
		len(res.Cases), len(res.Matches), len(res.Deletes), time.Since(start).Round(time.Millisecond), g.maxGap.Round(time.Microsecond), g.leaks)

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if outPath != "" {
		return os.WriteFile(outPath, buf.Bytes(), 0o644)
	}
	sum := sha256.Sum256(buf.Bytes())
	var o bytes.Buffer
	o.WriteString(beginMarker + "\n")
	o.Write(buf.Bytes())
	fmt.Fprintf(&o, "%s %x@@\n", endMarker, sum)
	_, err = os.Stdout.Write(o.Bytes())
	return err
}

// errnoName is the errno symbol of err, "" for nil.
func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var e unix.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
		return fmt.Sprintf("errno %d", int(e))
	}
	return err.Error()
}

func (g *gen) openData() (int, error) {
	return unix.Open(g.t.path("user_events_data"), unix.O_RDWR|unix.O_CLOEXEC, 0)
}

func (g *gen) register(fd int, cmd string, bit uint8, flags uint16) (uint32, error) {
	r := abi.UserReg{
		Size:       abi.UserRegSize,
		EnableBit:  bit,
		EnableSize: 4,
		Flags:      flags,
		EnableAddr: g.addr,
	}
	err := abi.RegisterName(fd, &r, cmd)
	return r.WriteIndex, err
}

func (g *gen) unregister(fd int, bit uint8) error {
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: bit, DisableAddr: g.addr}
	return abi.Unregister(fd, &u)
}

// settle waits until no user event is left, deleting persistent ones.
func (g *gen) settle(persistent bool) {
	if persistent {
		if err := g.t.truncDynamic(settle); err != nil {
			fmt.Fprintln(os.Stderr, "eventgolden: O_TRUNC dynamic_events:", err)
		}
	}
	ok, d := g.t.waitClean(settle)
	if ok && d > g.maxGap {
		g.maxGap = d
	}
	if ok && d > 200*time.Millisecond {
		fmt.Fprintf(os.Stderr, "eventgolden: slow teardown: %v\n", d.Round(time.Millisecond))
	}
}

// restore deletes whatever user events are left.
func (g *gen) restore() {
	if err := g.t.truncDynamic(settle); err != nil {
		fmt.Fprintln(os.Stderr, "eventgolden: O_TRUNC dynamic_events:", err)
	}
	if ok, _ := g.t.waitClean(settle); !ok {
		fmt.Fprintf(os.Stderr, "eventgolden: still not clean:\n%s", g.t.read("user_events_status"))
	}
}

func (g *gen) runCase(d *directive) *caseOut {
	c := &caseOut{Line: d.line, Cmd: d.a, Flags: d.flags}
	name, _, _ := strings.Cut(d.a, " ")
	multi := d.flags&abi.RegMultiFormat != 0

	atomic.StoreUint32(g.word, 0)
	fd, err := g.openData()
	if err != nil {
		c.IoctlErrno = errnoName(err)
		c.Note = "open user_events_data failed"
		return c
	}
	idx, err := g.register(fd, d.a, 31, d.flags)
	var ret abi.RetError
	if errors.As(err, &ret) {
		c.IoctlRet = int64(ret)
	} else {
		c.IoctlErrno = errnoName(err)
	}
	c.DynamicEvents = g.t.userLines()
	c.Status = g.t.read("user_events_status")
	if err == nil {
		c.WriteIndex = &idx
		var note string
		c.EventDir, note = g.t.eventDir(name, multi)
		c.Note = note
		if c.EventDir != "" {
			c.Format = g.t.read(c.EventDir + "/format")
		}
		if len(d.writes) > 0 {
			g.doWrites(c, d, fd, idx)
		}
		if err := g.unregister(fd, 31); err != nil {
			c.Note = joinNote(c.Note, "unregister: "+errnoName(err))
		}
		if len(d.writes) > 0 {
			c.EnableWord = append(c.EnableWord, atomic.LoadUint32(g.word))
		}
	}
	unix.Close(fd)
	g.settle(d.flags&abi.RegPersist != 0)

	if d.flags != 0 {
		c.DynSkipped = true
		return c
	}
	n, err := g.t.writeFile("dynamic_events", unix.O_APPEND, "u:"+d.a)
	c.DynErrno = errnoName(err)
	if err == nil && n != len("u:"+d.a) {
		c.DynRet = int64(n)
	}
	if err == nil {
		de := g.t.userLines()
		if de != c.DynamicEvents {
			c.DynDynamicEvents = &de
		}
		dir, _ := g.t.eventDir(name, false)
		var f string
		if dir != "" {
			f = g.t.read(dir + "/format")
		}
		if f != c.Format {
			c.DynFormat = &f
		}
	}
	// A failed multi-line write may have applied its earlier lines.
	g.settle(true)
	return c
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// doWrites enables the event, does the case's writes and disables it,
// recording the enable word after registration, enable and disable.
func (g *gen) doWrites(c *caseOut, d *directive, fd int, idx uint32) {
	c.EnableWord = append(c.EnableWord, atomic.LoadUint32(g.word))
	enable := c.EventDir + "/enable"
	if c.EventDir == "" {
		c.Note = joinNote(c.Note, "writes done with the event not enabled")
	} else if _, err := g.t.writeFile(enable, 0, "1"); err != nil {
		c.Note = joinNote(c.Note, "enable: "+errnoName(err))
	}
	c.EnableWord = append(c.EnableWord, atomic.LoadUint32(g.word))
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], idx)
	for _, p := range d.writes {
		if err := g.trace.clear(); err != nil {
			c.Note = joinNote(c.Note, "clear trace: "+errnoName(err))
		}
		n, err := g.write(fd, hdr[:], p)
		w := &writeOut{Payload: hex.EncodeToString(p), Errno: errnoName(err), N: n}
		if err != nil {
			w.N = -1
		}
		w.Trace = g.trace.text()
		if !utf8.ValidString(w.Trace) {
			w.TraceHex = hex.EncodeToString([]byte(w.Trace))
		}
		c.Writes = append(c.Writes, w)
	}
	if c.EventDir != "" {
		if _, err := g.t.writeFile(enable, 0, "0"); err != nil {
			c.Note = joinNote(c.Note, "disable: "+errnoName(err))
		}
	}
	c.EnableWord = append(c.EnableWord, atomic.LoadUint32(g.word))
}

// write writes [hdr][payload] to fd with one writev.
func (g *gen) write(fd int, hdr, payload []byte) (int, error) {
	iov := [][]byte{hdr}
	if len(payload) > 0 {
		iov = append(iov, payload)
	}
	return unix.Writev(fd, iov)
}

// warmUp traces one record from this task and sleeps, so that the next
// context switch saves our pid's comm in saved_cmdlines. Without it the
// first trace line read shows the task as "<...>" (and later reads of the
// same record show the name).
func (g *gen) warmUp() error {
	const name = "__eventgolden_warmup"
	fd, err := g.openData()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	idx, err := g.register(fd, name, 31, 0)
	if err != nil {
		return fmt.Errorf("register %s: %w", name, err)
	}
	enable := "events/user_events/" + name + "/enable"
	if _, err := g.t.writeFile(enable, 0, "1"); err != nil {
		return fmt.Errorf("enable %s: %w", name, err)
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], idx)
	_, werr := g.write(fd, hdr[:], nil)
	time.Sleep(20 * time.Millisecond)
	g.t.writeFile(enable, 0, "0")
	g.unregister(fd, 31)
	if werr != nil {
		return fmt.Errorf("write %s: %w", name, werr)
	}
	return g.trace.clear()
}

func (g *gen) runMatch(d *directive) *matchOut {
	m := &matchOut{Line: d.line, First: d.a, Second: d.b, Flags: d.flags, Flags2: d.flags2}
	atomic.StoreUint32(g.word, 0)
	fd, err := g.openData()
	if err != nil {
		m.FirstErrno = errnoName(err)
		return m
	}
	if _, err := g.register(fd, d.a, 31, d.flags); err != nil {
		m.FirstErrno = errnoName(err)
	} else {
		_, err := g.register(fd, d.b, 30, d.flags2)
		m.Errno = errnoName(err)
		m.Status = g.t.read("user_events_status")
		g.unregister(fd, 31)
		g.unregister(fd, 30)
	}
	unix.Close(fd)
	g.settle((d.flags|d.flags2)&abi.RegPersist != 0)
	return m
}

func (g *gen) runDelete(d *directive) *delOut {
	o := &delOut{Line: d.line, Create: d.a, LineText: d.b}
	_, err := g.t.writeFile("dynamic_events", unix.O_APPEND, "u:"+d.a)
	o.CreateErrno = errnoName(err)
	o.Before = g.t.userLines()
	_, err = g.t.writeFile("dynamic_events", unix.O_APPEND, d.b)
	o.Errno = errnoName(err)
	o.After = g.t.userLines()
	g.settle(true)
	return o
}
