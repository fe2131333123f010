package tracefilter

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// kernelGolden is kernel/cmd/filtergolden's JSON: what Linux 6.12 did with
// each filter of testdata/filter-cases.txt.
type kernelGolden struct {
	Kernel     string         `json:"kernel"`
	NrCPUs     int            `json:"nr_cpus"`
	CPU        int            `json:"cpu"`
	Comm       string         `json:"comm"`
	PID        int            `json:"pid"`
	Events     []string       `json:"events"`
	ID         int            `json:"id"`
	Records    []string       `json:"records"`
	Unfiltered string         `json:"unfiltered"`
	Filters    []*kernelEntry `json:"filters"`
}

type kernelEntry struct {
	Line      int    `json:"line"`
	Kind      string `json:"kind"`
	Text      string `json:"text"`
	Errno     string `json:"errno"`
	N         int    `json:"n"`
	File      string `json:"file"`
	SysFile   string `json:"sys_file,omitempty"`
	File2     string `json:"file2,omitempty"`
	ErrorLog  string `json:"error_log"`
	Pass      string `json:"pass,omitempty"`
	PerfErrno string `json:"perf_errno,omitempty"`
	PerfPass  string `json:"perf_pass,omitempty"`
}

func loadGolden(t testing.TB) *kernelGolden {
	t.Helper()
	b, err := os.ReadFile("testdata/kernel-filters.json")
	if err != nil {
		t.Fatal(err)
	}
	var g kernelGolden
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func unquote(t testing.TB, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return u
}

func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

var logStamp = regexp.MustCompile(`\[ *\d+\.\d{6}\] `)

// goldenRecords are the golden's records with the common header as the
// kernel wrote it for the trace: type = the event's id, flags and
// preempt_count 0 ("....." in the trace), the writer's pid.
func goldenRecords(t testing.TB, g *kernelGolden) [][]byte {
	var recs [][]byte
	for _, h := range g.Records {
		p, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		rec := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(p))
		binary.NativeEndian.PutUint16(rec[0:], uint16(g.ID))
		binary.NativeEndian.PutUint32(rec[4:], uint32(g.PID))
		recs = append(recs, append(rec, p...))
	}
	return recs
}

func passString(f *Filter, recs [][]byte, env *Env) string {
	b := make([]byte, len(recs))
	for i, r := range recs {
		b[i] = '0'
		if f.Match(r, env) {
			b[i] = '1'
		}
	}
	return string(b)
}

// vmSymbols are the two kernel functions the golden's ".function" terms
// name (the VM's _text and vfs_read); none of the records' values is in
// them. Their addresses do not matter: the terms only test the plumbing.
type vmSymbols struct{}

func (vmSymbols) Lookup(name string) uint64 {
	if name == "vfs_read" {
		return 0xffffffff81300000
	}
	return 0
}

func (vmSymbols) Function(addr uint64) (uint64, uint64, bool) {
	switch addr {
	case 0xffffffff81000000, 0xffffffff81300000:
		return addr, 0x100, true
	}
	return 0, 0, false
}

// TestGoldenKernel checks every filter of the golden against the model:
// the write's errno, the filter file's text, error_log's entry, the
// records that pass, and PERF_EVENT_IOC_SET_FILTER's errno and records.
func TestGoldenKernel(t *testing.T) {
	g := loadGolden(t)
	var evs []*eventdef.Event
	for _, cmd := range g.Events {
		ev, err := eventdef.Parse(cmd)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	ev := evs[0]
	recs := goldenRecords(t, g)
	env := &Env{CPU: g.CPU, Comm: g.Comm}
	opts := Options{NrCPUs: g.NrCPUs, Kallsyms: vmSymbols{}}
	var state State
	total, same := 0, 0
	for _, e := range g.Filters {
		text := unquote(t, e.Text)
		total++
		var bad []string
		check := func(what, got, want string) {
			if got != want {
				bad = append(bad, what+":\n got "+strconv.Quote(got)+"\nwant "+strconv.Quote(want))
			}
		}
		switch e.Kind {
		case "filter", "then":
			if e.Kind == "filter" {
				state = State{}
			}
			st, err := Write(ev, state, []byte(text), opts)
			state = st
			check("errno", errnoName(err), e.Errno)
			check("file", string(st.AppendFile(nil)), unquote(t, e.File))
			var log string
			var fe *Error
			if errors.As(err, &fe) {
				log = string(fe.AppendErrorLog(nil, 0))
			}
			check("error_log", logStamp.ReplaceAllString(log, ""), logStamp.ReplaceAllString(unquote(t, e.ErrorLog), ""))
			if e.Pass != "" {
				check("pass", passString(st.Filter, recs, env), e.Pass)
			}
			if e.Kind == "filter" {
				f, err := CompilePerf(ev, text, opts)
				perr := errnoName(err)
				if perr == "" {
					perr = "ok"
				}
				check("perf_errno", perr, e.PerfErrno)
				if e.PerfPass != "" && err == nil {
					check("perf_pass", passString(f, recs, env), e.PerfPass)
				}
			}
		case "sysfilter":
			sys, states, logs, err := WriteSystem(evs, make([]State, len(evs)), SystemState{}, []byte(text), opts)
			check("errno", errnoName(err), e.Errno)
			check("sys_file", string(sys.AppendSystemFile(nil)), unquote(t, e.SysFile))
			check("file", string(states[0].AppendFile(nil)), unquote(t, e.File))
			check("file2", string(states[1].AppendFile(nil)), unquote(t, e.File2))
			var log []byte
			for _, l := range logs {
				log = l.AppendErrorLog(log, 0)
			}
			check("error_log", logStamp.ReplaceAllString(string(log), ""), logStamp.ReplaceAllString(unquote(t, e.ErrorLog), ""))
			check("pass", passString(states[0].Filter, recs, env), e.Pass)
		}
		if len(bad) == 0 {
			same++
			continue
		}
		t.Errorf("line %d: %s %s:\n%s", e.Line, e.Kind, e.Text, strings.Join(bad, "\n"))
	}
	t.Logf("%d of %d filters as on Linux %s", same, total, g.Kernel)
}
