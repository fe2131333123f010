package eventdef

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
)

// kernelGolden is testdata/kernel-golden.json: what Linux 6.12.117 with
// CONFIG_USER_EVENTS=y answered to the directives of
// testdata/kernel-cases.txt. kernel/cmd/eventgolden captures it in a VM;
// its TestGoldenMatchesKernel checks it against the kernel (-update rewrites it).
type kernelGolden struct {
	Kernel string `json:"kernel"`
	Cases  []struct {
		Line          int    `json:"line"`
		Cmd           string `json:"cmd"`
		Flags         uint16 `json:"flags"`
		IoctlErrno    string `json:"ioctl_errno"`
		IoctlRet      int64  `json:"ioctl_ret"`
		Format        string `json:"format"`
		DynamicEvents string `json:"dynamic_events"`
		Writes        []struct {
			Payload  string `json:"payload"`
			Errno    string `json:"errno"`
			N        int    `json:"n"`
			Trace    string `json:"trace"`
			TraceHex string `json:"trace_hex"`
		} `json:"writes"`
		DynErrno   string `json:"dyn_errno"`
		DynRet     int64  `json:"dyn_ret"`
		DynSkipped bool   `json:"dyn_skipped"`
	} `json:"cases"`
	Matches []struct {
		Line       int    `json:"line"`
		First      string `json:"first"`
		Second     string `json:"second"`
		Flags      uint16 `json:"flags"`
		Flags2     uint16 `json:"flags2"`
		FirstErrno string `json:"first_errno"`
		Errno      string `json:"errno"`
	} `json:"matches"`
	Deletes []struct {
		Line        int    `json:"line"`
		Create      string `json:"create"`
		LineText    string `json:"line_text"`
		CreateErrno string `json:"create_errno"`
		Errno       string `json:"errno"`
	} `json:"deletes"`
}

func loadKernelGolden(t *testing.T) *kernelGolden {
	t.Helper()
	data, err := os.ReadFile("testdata/kernel-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g kernelGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// outcome is a kernel call's result as the golden file records it: the errno
// symbol ("" for success) and, for the struct-size quirk, the negative return
// value that is no errno.
type outcome struct {
	errno string
	ret   int64
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{}
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return outcome{errno: "not an errno: " + err.Error()}
	}
	if name := unix.ErrnoName(errno); name != "" && errno < 4096 {
		return outcome{errno: name}
	}
	// The kernel returned -errno, which user space does not see as an error.
	return outcome{ret: -int64(errno)}
}

// parseIoctl is what DIAG_IOCSREG does with a command before the registry
// looks at it: unknown flags are EINVAL (before the command is read), then
// the 511-byte limit of strndup_user, then the parse.
func parseIoctl(cmd string, flags uint16) (*Event, error) {
	if flags&^3 != 0 || len(cmd) > MaxCommandLen {
		return nil, unix.EINVAL
	}
	return Parse(cmd)
}

// maxRingPayload is the largest payload the ftrace ring buffer of this kernel
// records (4 KiB sub-buffers); a larger record is dropped and the write still
// succeeds. Package subsys implements the drop.
const maxRingPayload = 4064

// kernelHeader is the common header the kernel writes before validating a
// record (tracing_generic_entry_update): the event's type ID, no flags, no
// preempt count, and the writer's pid. Validators can see it: a __data_loc
// may point into it.
func kernelHeader(id, pid int) []byte {
	h := make([]byte, HeaderSize)
	binary.NativeEndian.PutUint16(h[0:], uint16(id))
	binary.NativeEndian.PutUint32(h[4:], uint32(pid))
	return h
}

// writerPID finds the pid of the generator's writes in the trace lines.
func writerPID(t *testing.T, g *kernelGolden) int {
	re := regexp.MustCompile(`-(\d+) +\[\d{3}\]`)
	for _, c := range g.Cases {
		for _, w := range c.Writes {
			if m := re.FindStringSubmatch(w.Trace); m != nil {
				pid, _ := strconv.Atoi(m[1])
				return pid
			}
		}
	}
	t.Fatal("no trace line with a pid in the golden file")
	return 0
}

// lineSafe reports whether writing "u:"+cmd to dynamic_events hands the
// whole command to user_event_create: no newline or '#' to split or cut the
// line, and within the line length limit. The rest of the dynamic_events
// file's behaviour belongs to package subsys.
func lineSafe(cmd string) bool {
	return !strings.ContainsAny(cmd, "\n#\x00") && len(cmd)+2 < 4094
}

// traceText returns what the kernel's trace showed for a write: its raw
// bytes, which may end in several lines. The ftrace line prefix
// ("comm-pid [cpu] flags timestamp: ") belongs to subsys; the test compares
// what follows it in the last line.
func traceText(t *testing.T, trace, traceHex string) string {
	if traceHex != "" {
		b, err := hex.DecodeString(traceHex)
		if err != nil {
			t.Fatalf("trace_hex: %v", err)
		}
		trace = string(b)
	}
	return strings.TrimSuffix(trace, "\n")
}

func TestKernelGoldenCases(t *testing.T) {
	g := loadKernelGolden(t)
	if len(g.Cases) < 150 {
		t.Errorf("golden corpus has %d command cases, want at least 150", len(g.Cases))
	}
	pid := writerPID(t, g)
	var compared, identical int
	for _, c := range g.Cases {
		t.Run("line"+strconv.Itoa(c.Line), func(t *testing.T) {
			ev, err := parseIoctl(c.Cmd, c.Flags)
			compared++
			want := outcome{c.IoctlErrno, c.IoctlRet}
			if got := outcomeOf(err); got != want {
				t.Fatalf("ioctl %q: got %+v (%v), kernel %+v", c.Cmd, got, err, want)
			}
			if err == nil && c.Format != "" {
				tp, id := formatNameID(t, c.Format)
				if tp != ev.Name && !strings.HasPrefix(tp, ev.Name+".") {
					t.Fatalf("format names %q for event %q", tp, ev.Name)
				}
				if got := ev.Format(tp, id); got != c.Format {
					t.Fatalf("format of %q:\n%s\nkernel:\n%s", c.Cmd, got, c.Format)
				}
			}
			if err == nil && c.DynamicEvents != "" {
				if got := ev.DynamicEventsLine(); got != c.DynamicEvents {
					t.Fatalf("dynamic_events of %q: %q, kernel %q", c.Cmd, got, c.DynamicEvents)
				}
			}
			for _, w := range c.Writes {
				payload, err := hex.DecodeString(w.Payload)
				if err != nil {
					t.Fatal(err)
				}
				_, id := formatNameID(t, c.Format)
				rec := append(kernelHeader(id, pid), payload...)
				err = ev.CheckSize(len(payload))
				if err == nil {
					err = ev.Validate(rec)
				}
				if got := outcomeOf(err).errno; got != w.Errno {
					t.Fatalf("write %s to %q: %q (%v), kernel %q", w.Payload, c.Cmd, got, err, w.Errno)
				}
				if w.Errno != "" {
					continue
				}
				if w.N != 4+len(payload) {
					t.Errorf("write %s returned %d, want the full %d bytes", w.Payload, w.N, 4+len(payload))
				}
				kernel := traceText(t, w.Trace, w.TraceHex)
				if kernel == "" && len(payload) > maxRingPayload {
					continue // dropped by the ring buffer
				}
				tp, _ := formatNameID(t, c.Format)
				got := string(ev.AppendTrace(nil, tp, rec))
				if !strings.HasSuffix(kernel, ": "+got) {
					t.Fatalf("trace of %s for %q:\n got %q\nkernel %q", w.Payload, c.Cmd, got, kernel)
				}
			}
			if !c.DynSkipped && lineSafe(c.Cmd) {
				_, err := Parse(skipSpaces(c.Cmd)) // user_event_create skips spaces after "u:"
				if got, want := outcomeOf(err), (outcome{c.DynErrno, c.DynRet}); got != want {
					t.Fatalf("dynamic_events u:%q: got %+v (%v), kernel %+v", c.Cmd, got, err, want)
				}
			}
			identical++
		})
	}
	t.Logf("kernel %s: %d/%d command cases identical", g.Kernel, identical, compared)
}

// formatNameID reads the name and ID lines of a format file.
func formatNameID(t *testing.T, format string) (string, int) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(format, "name: "), "\n")
	idText, _, _ := strings.Cut(strings.TrimPrefix(rest, "ID: "), "\n")
	id, err := strconv.Atoi(idText)
	if err != nil {
		t.Fatalf("format has no ID line: %q", format)
	}
	return name, id
}

func TestKernelGoldenMatches(t *testing.T) {
	g := loadKernelGolden(t)
	for _, m := range g.Matches {
		if m.FirstErrno != "" || m.Flags != 0 || m.Flags2 != 0 {
			continue // multi-format lookups are the registry's (package subsys)
		}
		first, err := Parse(m.First)
		if err != nil {
			t.Errorf("line %d: first %q: %v, but the kernel registered it", m.Line, m.First, err)
			continue
		}
		// find_user_event: same name → reuse if the fields match, else
		// EADDRINUSE; another name → a new event, parsed.
		var got outcome
		if name, args, err := SplitCommand(m.Second); err != nil {
			got = outcomeOf(err)
		} else if name == first.Name {
			if !first.MatchArgs(args) {
				got = outcome{errno: "EADDRINUSE"}
			}
		} else {
			_, err := Parse(m.Second)
			got = outcomeOf(err)
		}
		if want := (outcome{errno: m.Errno}); got != want {
			t.Errorf("line %d: register %q then %q: %+v, kernel %+v", m.Line, m.First, m.Second, got, want)
		}
	}
}

func TestKernelGoldenDeletes(t *testing.T) {
	g := loadKernelGolden(t)
	for _, d := range g.Deletes {
		if d.CreateErrno != "" {
			continue
		}
		ev, err := Parse(skipSpaces(d.Create))
		if err != nil {
			t.Errorf("line %d: create %q: %v, but the kernel created it", d.Line, d.Create, err)
			continue
		}
		// The one persistent, unused event is deleted if the line names it.
		// dynamic_events cuts every line at '#' before it runs it.
		line, _, _ := strings.Cut(d.LineText, "#")
		var got outcome
		if dc, err := ParseDeleteCommand(line); err != nil {
			got = outcomeOf(err)
		} else if !dc.Matches(ev) {
			got = outcome{errno: "ENOENT"}
		}
		if want := (outcome{errno: d.Errno}); got != want {
			t.Errorf("line %d: %q on %q: %+v, kernel %+v", d.Line, d.LineText, d.Create, got, want)
		}
	}
}
