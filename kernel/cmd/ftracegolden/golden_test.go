package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

var update = flag.Bool("update", false, "rewrite the golden file from the kernel's answers")

const goldenFile = "../../../internal/subsys/ftrace/testdata/kernel-ftrace.json"

// TestGoldenMatchesKernel runs the capture in the reference kernel and checks
// that internal/ftrace/testdata/kernel-ftrace.json is what the kernel
// answers now; with -update it rewrites the file instead.
func TestGoldenMatchesKernel(t *testing.T) {
	vmtest.Require(t)
	var js, rest []byte
	// On the virtual clock a busy host cannot stall the guest's time. As a
	// guard, the capture re-runs in place a scenario whose time gaps fell
	// on the wrong side of 2^27 ns; one that cannot run twice in a boot
	// asks for a fresh boot with rerunMarker.
	for boot := 1; ; boot++ {
		res := vmtest.RunProgram(t, "./kernel/cmd/ftracegolden", comm, vmtest.Options{VirtualClock: true})
		var err error
		js, rest, err = vmtest.Section(res.Output, "FTCAPTURE-JSON")
		t.Logf("capture in the VM, boot %d (%v):\n%s", boot, res.Elapsed.Round(time.Millisecond), rest)
		if err != nil && bytes.Contains(res.Output, []byte(rerunMarker)) && boot < bootAttempts {
			continue
		}
		if err != nil {
			if bytes.Contains(res.Output, []byte(rerunMarker)) {
				t.Fatalf("the capture asked for a fresh boot %d times in a row (a stall each time in the scenario that cannot run twice in a boot): %v", boot, err)
			}
			t.Fatal(err)
		}
		break
	}

	if *update {
		if err := os.WriteFile(goldenFile, js, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Clean(goldenFile), len(js))
		return
	}
	// Not load: the capture's model of the ring buffer, or the kernel,
	// changed (see checkPages).
	if bytes.Contains(rest, []byte(pagesDisagree)) {
		t.Errorf("the capture's gap check and the ring buffer's pages disagree (lines %q above)", pagesDisagree)
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var gotG, wantG golden
	if err := decode(js, &gotG); err != nil {
		t.Fatalf("the kernel's JSON: %v", err)
	}
	if err := decode(want, &wantG); err != nil {
		t.Fatalf("%s: %v", filepath.Clean(goldenFile), err)
	}
	// The file must be exactly what the capture writes, so that -update
	// changes only what the kernel changed; then comparing the decoded,
	// normalised values is comparing bytes.
	if b, err := encode(&wantG); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("%s is not in the form the capture writes it (edited by hand?); run: %s", filepath.Clean(goldenFile), updateCmd)
	}
	normalise(&gotG)
	normalise(&wantG)
	gotN, err1 := encode(&gotG)
	wantN, err2 := encode(&wantG)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !bytes.Equal(gotN, wantN) {
		t.Fatalf("%s is not what the kernel answers now (-golden +kernel; what varies from boot to boot masked):\n%s\n"+
			"If the change is expected, run: %s", filepath.Clean(goldenFile), cmp.Diff(wantG, gotG), updateCmd)
	}
}

// bootAttempts bounds the boots TestGoldenMatchesKernel makes when the
// capture asks for a fresh one (rerunMarker).
const bootAttempts = 5

const updateCmd = "go test ./kernel/cmd/ftracegolden -run TestGoldenMatchesKernel -update"

func decode(b []byte, g *golden) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(g)
}

// normalise masks in g what differs between two boots of the same kernel
// running the same scenarios, and nothing else:
//   - the workers' tids ("tid", and the pid in trace lines and records):
//     which threads the Go runtime starts first varies;
//   - the clocks: "mono", the time stamps of trace lines, "oldest event ts"
//     and "now ts" in per_cpu stats, and in trace_pipe_raw pages the page
//     time stamp, the events' time deltas and the time extends' values
//     (whether a time extend is there is compared: the scenarios' sleeps
//     put each gap on one side of 2^27 ns, and the capture re-runs a
//     scenario in which one fell on the other, see checkGaps);
//   - the need-resched flags of records (TRACE_FLAG_NEED_RESCHED and
//     TRACE_FLAG_PREEMPT_RESCHED, the second flag of a trace line, "." or
//     "N"): whether a timer tick had asked for a reschedule;
//   - the bytes the kernel leaves stale in a page, from whatever the page
//     held before: the up to 3 bytes that round a record up to 4 (4 for an
//     empty record), found by matching the record with the payloads the
//     scenarios write, and the body of padding;
//   - which of the two readers of pipe2 "all" got trace_pipe and which one
//     got EBUSY or nothing: they race, and only the text they read together
//     is compared.
func normalise(g *golden) {
	payloads := map[string]bool{}
	for _, sc := range g.Scenarios {
		for _, s := range sc.Steps {
			switch s.Op {
			case "write":
				for i := 0; i < s.Count; i++ {
					payloads[string(payload(s.Size, s.Seq+uint32(i)))] = true
				}
			case "write_hex":
				if p, err := hex.DecodeString(s.Hex); err == nil {
					payloads[string(p)] = true
				}
			}
		}
	}
	for _, sc := range g.Scenarios {
		for _, s := range sc.Steps {
			s.TID = 0
			for i := range s.Mono {
				s.Mono[i] = 0
			}
			if s.Op == "pipe2" && s.Arg == "all" {
				s.Text = strings.Replace(s.Text, "@@SPLIT@@\n", "", 1)
				s.Err = ""
			}
			s.Text = string(maskText([]byte(s.Text)))
			if s.TextB != "" {
				if b, err := base64.StdEncoding.DecodeString(s.TextB); err == nil {
					s.TextB = base64.StdEncoding.EncodeToString(maskText(b))
				}
			}
			for i, p := range s.Pages {
				if b, err := base64.StdEncoding.DecodeString(p); err == nil {
					s.Pages[i] = base64.StdEncoding.EncodeToString(maskPage(b, payloads))
				}
			}
		}
	}
}

// The prefix of a trace line ("       ftcapture-49      [000] .N...     5.313327: "),
// field by field, so that a line cut short by a small read is masked as far
// as it goes; and the clocks in per_cpu stats.
var (
	linePID   = regexp.MustCompile(`(?m)^( *ftcapture-)\d+ *`)
	lineFlag  = regexp.MustCompile(`(?m)^( *ftcapture-PID \[\d{3}\] \S)\S`)
	lineTS    = regexp.MustCompile(`(?m)^( *ftcapture-PID \[\d{3}\] \S{5}) +\d+\.\d{6}: `)
	statClock = regexp.MustCompile(`(?m)^(oldest event ts|now ts): +\d+\.\d{6}$`)
)

func maskText(b []byte) []byte {
	b = linePID.ReplaceAll(b, []byte("${1}PID "))
	b = lineFlag.ReplaceAll(b, []byte("${1}?"))
	b = lineTS.ReplaceAll(b, []byte("${1} TS: "))
	return statClock.ReplaceAll(b, []byte("${1}: TS"))
}

// A trace_pipe_raw page (include/linux/ring_buffer.h, kernel/trace/ring_buffer.c):
// a u64 time stamp, a u64 commit (the data's length, and flags), then
// events, each a u32 type_len:5 time_delta:27 and its array.
const (
	pageHeader     = 16
	commitMask     = 0x3fffffff
	typeLenMax     = 28
	typePadding    = 29
	typeTimeExtend = 30
	typeTimeStamp  = 31
	entrySize      = 8    // struct trace_entry: u16 type, u8 flags, u8 preempt_count, s32 pid
	reschedFlags   = 0x24 // TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_PREEMPT_RESCHED
)

// maskPage returns a copy of the (trailing-zero-cut) page b with the masks
// of normalise applied, cut again.
func maskPage(b []byte, payloads map[string]bool) []byte {
	if len(b) < pageHeader {
		return b
	}
	p := make([]byte, 4096)
	copy(p, b)
	binary.LittleEndian.PutUint64(p, 0)
	size := int(binary.LittleEndian.Uint64(p[8:]) & commitMask)
	d := p[pageHeader:]
	size = min(size, len(d))
	for pos := 0; pos+4 <= size; {
		w := binary.LittleEndian.Uint32(d[pos:])
		typeLen, delta := w&31, w>>5
		binary.LittleEndian.PutUint32(d[pos:], typeLen) // no time delta
		var rec []byte
		switch {
		case typeLen == typePadding && delta == 0: // the rest of the page
			clear(d[pos+4 : size])
			pos = size
			continue
		case typeLen == typePadding:
			a := int(binary.LittleEndian.Uint32(d[pos+4:]))
			binary.LittleEndian.PutUint32(d[pos:], typeLen|1<<5) // keep it a non-null padding
			if pos+4+a > size || a < 4 {
				return b
			}
			clear(d[pos+8 : pos+4+a])
			pos += 4 + a
			continue
		case typeLen == typeTimeExtend || typeLen == typeTimeStamp:
			binary.LittleEndian.PutUint32(d[pos+4:], 0)
			pos += 8
			continue
		case typeLen == 0:
			a := int(binary.LittleEndian.Uint32(d[pos+4:]))
			if pos+4+a > size || a < 4 {
				return b
			}
			rec = d[pos+8 : pos+4+a]
			pos += 4 + a
		default:
			n := int(typeLen) * 4
			if pos+4+n > size {
				return b
			}
			rec = d[pos+4 : pos+4+n]
			pos += 4 + n
		}
		if len(rec) < entrySize {
			continue
		}
		rec[2] &^= reschedFlags
		clear(rec[4:8]) // pid
		// The shortest payload written that the record starts with and
		// that rounds up to its length: the bytes after it are stale.
		body := rec[entrySize:]
		for stale := min(len(body), 4); stale >= 0; stale-- {
			n := len(body) - stale
			if (stale < 4 || n == 0) && payloads[string(body[:n])] {
				clear(body[n:])
				break
			}
		}
	}
	return bytes.TrimRight(p, "\x00")
}
