// Command filtergolden captures how a real kernel's event filters parse,
// refuse and filter, so that package tracefilter can be tested byte for
// byte against it. It is a test-data generator run inside the reference
// kernel VM as root; it is not part of uetrace and never runs on the host.
//
// # Regenerating
//
// TestGoldenMatchesKernel (golden_test.go) builds this program statically,
// boots the kernel with package kernel/vmtest, runs
//
//	filtergolden -cases filter-cases.txt
//
// there with tracefilter/testdata/filter-cases.txt, and compares the JSON
// with tracefilter/testdata/kernel-filters.json. To rewrite the golden file
// from the kernel's answers:
//
//	go test ./kernel/cmd/filtergolden -run TestGoldenMatchesKernel -update
//
// On stdout the JSON comes between "@@FILTERGOLDEN-JSON-BEGIN@@" and
// "@@FILTERGOLDEN-JSON-END <sha256>@@"; diagnostics go to stderr.
//
// # Input
//
// The case file's format is described at its top: the events, the records
// of the first event, and the filters to write to its filter file, to the
// system's filter file, or with PERF_EVENT_IOC_SET_FILTER.
//
// # Procedure
//
// The events are registered once (DIAG_IOCSREG on one open
// user_events_data) and the first is enabled through its enable file and,
// for each filter, opened as a perf event of this task with a sample for
// every record (PERF_SAMPLE_RAW). For each "filter" directive: the filter
// file is cleared (write "0"), error_log is cleared (O_TRUNC), the text is
// written with one write(2) (its errno and count recorded), the filter
// file and error_log are read back; if the write succeeded, the trace is
// cleared, every record is written and the trace read back, and the
// records that are in it ("pass": one character per record, "1" if it is
// there). The same text is then given to PERF_EVENT_IOC_SET_FILTER on the
// perf event (its errno recorded) and, if that succeeded, every record is
// written again and the samples read ("perf_pass"). "then" directives do
// the same without clearing the filter first. "sysfilter" directives write
// events/user_events/filter (after writing "0" to it) and record that file,
// both events' filter files, error_log and the first event's pass string.
//
// The process pins itself to CPU 0, runs with GOMAXPROCS(1) on its locked
// main thread and names itself "filtergolden" (filters on CPU and comm see
// those). error_log's time stamps vary between boots; the test masks them.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
)

const (
	beginMarker = "@@FILTERGOLDEN-JSON-BEGIN@@"
	endMarker   = "@@FILTERGOLDEN-JSON-END"
	comm        = "filtergolden"
)

// Golden is the JSON the program writes; package tracefilter's tests read
// the same shape.
type Golden struct {
	Kernel string `json:"kernel"`
	// NrCPUs is nr_cpu_ids (the count of /sys/devices/system/cpu/possible).
	NrCPUs int    `json:"nr_cpus"`
	CPU    int    `json:"cpu"`
	Comm   string `json:"comm"`
	// PID is the writer's pid (common_pid); it varies between boots.
	PID int `json:"pid"`
	// Events are the commands registered; the first is the one filtered.
	Events []string `json:"events"`
	// ID is the first event's trace event id (common_type).
	ID int `json:"id"`
	// Records are the first event's payloads, in hex, without the write
	// index.
	Records []string `json:"records"`
	// Unfiltered is the trace of all records with no filter, as the kernel
	// prints it (pid and time stamps masked by the test), to show the
	// common fields' values.
	Unfiltered string   `json:"unfiltered"`
	Filters    []*Entry `json:"filters"`
}

// Entry is one directive's result.
type Entry struct {
	Line int    `json:"line"`
	Kind string `json:"kind"` // filter, then, sysfilter
	// Text is the bytes written, Go-quoted.
	Text  string `json:"text"`
	Errno string `json:"errno"`
	N     int    `json:"n"`
	// File is the filter file after the write, Go-quoted.
	File string `json:"file"`
	// SysFile and File2 are events/user_events/filter and the second
	// event's filter file (sysfilter only), Go-quoted.
	SysFile  string `json:"sys_file,omitempty"`
	File2    string `json:"file2,omitempty"`
	ErrorLog string `json:"error_log"`
	// Pass has a character per record: "1" if it reached the trace.
	Pass string `json:"pass,omitempty"`
	// PerfErrno is PERF_EVENT_IOC_SET_FILTER's result for Text
	// ("filter" only); PerfPass the records sampled with it set.
	PerfErrno string `json:"perf_errno,omitempty"`
	PerfPass  string `json:"perf_pass,omitempty"`
}

type directive struct {
	line int
	kind string
	text string
	vals []string
}

func main() {
	casesPath := flag.String("cases", "filter-cases.txt", "case file")
	tfs := flag.String("tracefs", "/sys/kernel/tracing", "tracefs mount point")
	flag.Parse()
	if err := run(*casesPath, *tfs); err != nil {
		fmt.Fprintln(os.Stderr, "filtergolden:", err)
		os.Exit(1)
	}
}

func init() { runtime.LockOSThread() }

func parseCases(r io.Reader) ([]*directive, error) {
	var ds []*directive
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		d := &directive{line: n, kind: kind}
		switch kind {
		case "long":
			// long <n> "<unit>" "<suffix>": a filter of unit n times and
			// suffix.
			ns, rest, _ := strings.Cut(rest, " ")
			count, err := strconv.Atoi(ns)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			vals, err := splitValues(rest)
			if err != nil || len(vals) != 2 {
				return nil, fmt.Errorf("line %d: want <n> \"<unit>\" \"<suffix>\"", n)
			}
			unit, err1 := strconv.Unquote(vals[0])
			suffix, err2 := strconv.Unquote(vals[1])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			d.kind = "filter"
			d.text = strings.Repeat(unit, count) + suffix
		case "random":
			// random <seed> <n>: n filters made by randomFilters.
			var seed uint64
			var count int
			if _, err := fmt.Sscanf(rest, "%d %d", &seed, &count); err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			for _, f := range randomFilters(seed, count) {
				ds = append(ds, &directive{line: n, kind: "filter", text: f})
			}
			continue
		case "event", "filter", "then", "sysfilter":
			s, err := strconv.Unquote(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			d.text = s
		case "record":
			vals, err := splitValues(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			d.vals = vals
		default:
			return nil, fmt.Errorf("line %d: unknown directive %q", n, kind)
		}
		ds = append(ds, d)
	}
	return ds, sc.Err()
}

// splitValues splits a record's values: numbers and Go-quoted strings
// (kept quoted), separated by spaces.
func splitValues(s string) ([]string, error) {
	var vals []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			vals = append(vals, q)
			s = s[len(q):]
			continue
		}
		v, rest, _ := strings.Cut(s, " ")
		vals = append(vals, v)
		s = rest
	}
	return vals, nil
}

// EncodeRecord builds a payload of ev from a record directive's values:
// quoted strings for text, struct and loc fields (eventdef.Encoder.String),
// numbers for the others.
func EncodeRecord(ev *eventdef.Event, vals []string) ([]byte, error) {
	if len(vals) != len(ev.Fields) {
		return nil, fmt.Errorf("%d values for %d fields", len(vals), len(ev.Fields))
	}
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	for _, v := range vals {
		if strings.HasPrefix(v, `"`) {
			s, err := strconv.Unquote(v)
			if err != nil {
				return nil, err
			}
			enc.String(s)
			continue
		}
		if strings.HasPrefix(v, "-") {
			n, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				return nil, err
			}
			enc.Int(n)
			continue
		}
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return nil, err
		}
		enc.Uint(n)
	}
	return enc.Payload()
}

type gen struct {
	tfs      string
	data     int
	index    uint32
	payloads [][]byte
	dir      string // events/user_events/<first>
	dir2     string
	id       int
	perfFD   int
}

func (g *gen) path(rel string) string { return filepath.Join(g.tfs, rel) }

// read returns a tracefs file's text. It reads with one read(2) of 64 KiB
// and then until EOF: the filter files answer only a read at offset 0
// (event_filter_read returns 0 at any other), so a reader with a small
// first buffer, as os.ReadFile's 512 bytes, would lose the rest.
func (g *gen) read(rel string) string {
	fd, err := unix.Open(g.path(rel), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "open error: " + errnoName(err)
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return "read error: " + errnoName(err)
		}
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

func (g *gen) write(rel, s string, flags int) (int, error) {
	fd, err := unix.Open(g.path(rel), unix.O_WRONLY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	return unix.Write(fd, []byte(s))
}

func (g *gen) truncate(rel string) error {
	fd, err := unix.Open(g.path(rel), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

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

func run(casesPath, tfs string) error {
	runtime.GOMAXPROCS(1)
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity: %w", err)
	}
	name := []byte(comm + "\x00")
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NAME): %w", err)
	}
	f, err := os.Open(casesPath)
	if err != nil {
		return err
	}
	ds, err := parseCases(f)
	f.Close()
	if err != nil {
		return err
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	cpus, err := procfs.PossibleCPUs()
	if err != nil {
		return err
	}
	res := &Golden{Kernel: unix.ByteSliceToString(uts.Release[:]), NrCPUs: len(cpus), CPU: 0, Comm: comm, PID: os.Getpid(), Filters: []*Entry{}}

	g := &gen{tfs: tfs, perfFD: -1}
	g.data, err = unix.Open(g.path("user_events_data"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	var first *eventdef.Event
	for _, d := range ds {
		switch d.kind {
		case "event":
			ev, err := eventdef.Parse(d.text)
			if err != nil {
				return fmt.Errorf("line %d: %v", d.line, err)
			}
			bit := uint8(31 - len(res.Events))
			r := abi.UserReg{Size: abi.UserRegSize, EnableBit: bit, EnableSize: 4, EnableAddr: uint64(uintptr(unsafe.Pointer(&page[0])))}
			if err := abi.RegisterName(g.data, &r, d.text); err != nil {
				return fmt.Errorf("line %d: register: %v", d.line, err)
			}
			if first == nil {
				first = ev
				g.index = r.WriteIndex
				g.dir = "events/user_events/" + ev.Name
			} else if g.dir2 == "" {
				g.dir2 = "events/user_events/" + ev.Name
			}
			res.Events = append(res.Events, d.text)
		case "record":
			p, err := EncodeRecord(first, d.vals)
			if err != nil {
				return fmt.Errorf("line %d: %v", d.line, err)
			}
			g.payloads = append(g.payloads, p)
			res.Records = append(res.Records, hex.EncodeToString(p))
		}
	}
	if first == nil {
		return errors.New("no event")
	}
	if res.ID, err = strconv.Atoi(strings.TrimSpace(g.read(g.dir + "/id"))); err != nil {
		return fmt.Errorf("id: %v", err)
	}
	g.id = res.ID
	if _, err := g.write(g.dir+"/enable", "1", 0); err != nil {
		return fmt.Errorf("enable: %v", err)
	}
	// Warm-up: get the comm into saved_cmdlines.
	g.writeRecords()
	_ = g.truncate("trace")
	g.writeRecords()
	res.Unfiltered = g.traceBody()

	for _, d := range ds {
		var e *Entry
		switch d.kind {
		case "filter", "then":
			e = g.runFilter(d)
		case "sysfilter":
			e = g.runSysFilter(d)
		default:
			continue
		}
		res.Filters = append(res.Filters, e)
	}
	fmt.Fprintf(os.Stderr, "filtergolden: %d filters, %d records\n", len(res.Filters), len(res.Records))

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	var o bytes.Buffer
	o.WriteString(beginMarker + "\n")
	o.Write(buf.Bytes())
	fmt.Fprintf(&o, "%s %x@@\n", endMarker, sum)
	_, err = os.Stdout.Write(o.Bytes())
	return err
}

// quote is Go quoting, so that any byte survives JSON.
func quote(s string) string { return strconv.Quote(s) }

func (g *gen) writeRecords() {
	hdr := make([]byte, 4)
	binary.NativeEndian.PutUint32(hdr, g.index)
	for i, p := range g.payloads {
		if _, err := unix.Write(g.data, append(hdr[:4:4], p...)); err != nil {
			fmt.Fprintf(os.Stderr, "filtergolden: write of record %d: %v\n", i, err)
		}
	}
}

func (g *gen) traceBody() string {
	body := g.read("trace")
	for strings.HasPrefix(body, "#") {
		_, rest, _ := strings.Cut(body, "\n")
		body = rest
	}
	return body
}

var idxRE = regexp.MustCompile(`: idx=0x([0-9a-f]+) `)

// passString writes every record and returns which reached the trace.
func (g *gen) passString() string {
	_ = g.truncate("trace")
	g.writeRecords()
	pass := bytes.Repeat([]byte("0"), len(g.payloads))
	for _, m := range idxRE.FindAllStringSubmatch(g.traceBody(), -1) {
		i, err := strconv.ParseUint(m[1], 16, 32)
		if err == nil && int(i) < len(pass) {
			pass[i] = '1'
		}
	}
	return string(pass)
}

func (g *gen) runFilter(d *directive) *Entry {
	e := &Entry{Line: d.line, Kind: d.kind, Text: quote(d.text)}
	if d.kind == "filter" {
		if _, err := g.write(g.dir+"/filter", "0", 0); err != nil {
			fmt.Fprintf(os.Stderr, "filtergolden: line %d: clearing the filter: %v\n", d.line, err)
		}
	}
	_ = g.truncate("error_log")
	n, err := g.write(g.dir+"/filter", d.text, 0)
	e.Errno, e.N = errnoName(err), n
	e.File = quote(g.read(g.dir + "/filter"))
	e.ErrorLog = quote(g.read("error_log"))
	if err == nil {
		e.Pass = g.passString()
	}
	if d.kind == "filter" {
		e.PerfErrno, e.PerfPass = g.perf(d.text)
		if e.PerfErrno == "" {
			e.PerfErrno = "ok"
		}
	}
	return e
}

func (g *gen) runSysFilter(d *directive) *Entry {
	e := &Entry{Line: d.line, Kind: d.kind, Text: quote(d.text)}
	if _, err := g.write("events/user_events/filter", "0", 0); err != nil {
		fmt.Fprintf(os.Stderr, "filtergolden: line %d: clearing the system filter: %v\n", d.line, err)
	}
	_ = g.truncate("error_log")
	n, err := g.write("events/user_events/filter", d.text, 0)
	e.Errno, e.N = errnoName(err), n
	e.SysFile = quote(g.read("events/user_events/filter"))
	e.File = quote(g.read(g.dir + "/filter"))
	e.File2 = quote(g.read(g.dir2 + "/filter"))
	e.ErrorLog = quote(g.read("error_log"))
	e.Pass = g.passString()
	_, _ = g.write("events/user_events/filter", "0", 0)
	return e
}

// perf opens the first event as a perf event of this task, sets the
// filter, writes the records and returns the ioctl's errno and, if it
// succeeded, which records were sampled.
func (g *gen) perf(text string) (string, string) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:      uint64(g.id),
		Bits:        unix.PerfBitDisabled,
		Sample:      1,
		Sample_type: unix.PERF_SAMPLE_RAW,
		Wakeup:      1,
	}
	fd, err := perfring.Open(&attr, 0, -1)
	if err != nil {
		return "open: " + errnoName(err), ""
	}
	ring, err := perfring.NewRing(fd, 8)
	if err != nil {
		unix.Close(fd)
		return "mmap: " + errnoName(err), ""
	}
	defer ring.Close()
	b := append([]byte(text), 0)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(b)
	if errno != 0 {
		return errnoName(errno), ""
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return "enable: " + errnoName(err), ""
	}
	g.writeRecords()
	_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	pass := bytes.Repeat([]byte("0"), len(g.payloads))
	ring.Read(func(rec []byte) {
		// perf_event_header (8), u32 raw size, raw: the record.
		if len(rec) < 8+4+12 || binary.NativeEndian.Uint32(rec[0:4]) != unix.PERF_RECORD_SAMPLE {
			return
		}
		i := binary.NativeEndian.Uint32(rec[12+8 : 12+12])
		if int(i) < len(pass) {
			pass[i] = '1'
		}
	})
	return "", string(pass)
}
