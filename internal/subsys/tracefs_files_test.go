package subsys

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys/ftrace"
	"github.com/uetrace/uetrace/perfdata"
)

// kernelFiles is testdata/kernel-tracefs-files.json, what Linux 6.12.117's
// tracefs files that trace-cmd reads said and did in the VM
// (kernel/cmd/tracefsgolden, whose doc says what each op is).
type kernelFiles struct {
	Kernel string `json:"kernel"`
	NCPU   int    `json:"ncpu"`
	Comm   string `json:"comm"`
	Steps  []struct {
		Op    string   `json:"op"`
		Path  string   `json:"path"`
		Arg   string   `json:"arg"`
		CPU   int      `json:"cpu"`
		Count int      `json:"count"`
		Mode  string   `json:"mode"`
		Names []string `json:"names"`
		Text  string   `json:"text"`
		Err   string   `json:"err"`
	} `json:"steps"`
}

// A fileDifference is where this tree knowingly answers other than the
// kernel did: ours is its answer (a step's text, its error, or an ls's
// names joined by ", "), and why says why.
type fileDifference struct{ ours, why string }

// fileDifferences are keyed by the step's op, path and argument, and "#n"
// for the n-th such step where there are several.
var fileDifferences = map[string]fileDifference{
	"read available_tracers":          {"nop\n", "uetrace has the nop tracer alone: there are no function tracers of user space"},
	"write trace_options nooverwrite": {"EINVAL", "the buffer is in overwrite mode only; writes that would change an option the tree has only as the kernel's default are EINVAL"},
	"read trace_options #3":           {defaultOptions, "nooverwrite was refused, so overwrite is on"},
	"write trace_clock counter":       {"EINVAL", "uetrace's stamps are CLOCK_MONOTONIC: it shows them as local, global, perf or mono, and has no counter, uptime, mono_raw, boot, tai or x86-tsc clock"},
	"read trace_clock #4":             {"[local] global counter uptime perf mono mono_raw boot tai x86-tsc\n", "counter was refused, so local stays"},
}

// defaultOptions is trace_options as the test kernel boots.
const defaultOptions = "print-parent\nnosym-offset\nnosym-addr\nnoverbose\nnoraw\nnohex\nnobin\nnoblock\nnofields\ntrace_printk\n" +
	"annotate\nnouserstacktrace\nnosym-userobj\nnoprintk-msg-only\ncontext-info\nnolatency-format\nrecord-cmd\nnorecord-tgid\n" +
	"overwrite\nnodisable_on_free\nirq-info\nmarkers\nnoevent-fork\ntrace_printk_dest\nnopause-on-trace\nhash-ptr\nfunction-trace\n" +
	"nofunction-fork\nnodisplay-graph\nnostacktrace\nnotest_nop_accept\nnotest_nop_refuse\n"

// ftraceDirDifference: an ftrace event's directory has format, and id
// for function and print, and not the kernel's hist, inject or trigger
// (as user events' directories have none of them: see the package doc).
const ftraceDirDifference = "an ftrace event's directory has format, and id where the kernel has one, not hist, inject or trigger"

// TestTracefsFilesAreTheKernels replays, on a subsystem with the test
// kernel's two CPUs, what testdata/kernel-tracefs-files.json did on the
// kernel, and compares each answer: the modes, the text and the errno of
// every file trace-cmd reads besides the events' and the ring buffer's —
// trace_clock, trace_options, current_tracer, available_tracers,
// buffer_percent, tracing_cpumask, saved_cmdlines, saved_tgids,
// events/header_page and header_event, events/ftrace/ and per_cpu/ —
// except fileDifferences, where the answer must be the one they say.
func TestTracefsFilesAreTheKernels(t *testing.T) {
	b, err := os.ReadFile("testdata/kernel-tracefs-files.json")
	if err != nil {
		t.Fatal(err)
	}
	var k kernelFiles
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	s := New(Options{NumCPU: k.NCPU})
	tree := s.FS()
	f := s.Open()
	defer f.Close()
	// The writers: one thread on each CPU, of one process.
	const pid = 4000
	tids := []int32{4001, 4002}
	mask := strings.NewReplacer("4001 ", "<T0> ", "4002 ", "<T1> ", "4000\n", "<P>\n")
	var index uint32
	errName := func(err error) string {
		var e unix.Errno
		if errors.As(err, &e) {
			return unix.ErrnoName(e)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	seen := map[string]int{}
	used := map[string]bool{}
	for i, st := range k.Steps {
		key := strings.TrimSpace(st.Op + " " + st.Path + " " + strings.TrimSpace(st.Arg))
		seen[key]++
		if seen[key] > 1 {
			key += " #" + strconv.Itoa(seen[key])
		}
		want := st.Text + st.Err
		var got string
		switch st.Op {
		case "stat":
			e, err := tree.Stat(st.Path)
			got = strconv.FormatUint(uint64(e.Mode.Perm()), 8) + errName(err)
			want = st.Mode + st.Err
		case "ls":
			ents, err := tree.ReadDir(st.Path)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name+" "+strconv.FormatUint(uint64(e.Mode.Perm()), 8))
			}
			slices.Sort(names)
			got, want = strings.Join(names, ", ")+errName(err), strings.Join(st.Names, ", ")+st.Err
			if strings.HasPrefix(st.Path, "events/ftrace/") {
				// The difference is the same in each: check it here.
				var kept []string
				for _, n := range st.Names {
					if strings.HasPrefix(n, "format ") || strings.HasPrefix(n, "id ") {
						kept = append(kept, n)
					}
				}
				if got != strings.Join(kept, ", ") {
					t.Errorf("step %d, %s: %q, want the kernel's %q less hist, inject and trigger (%s)", i, key, got, want, ftraceDirDifference)
				}
				continue
			}
		case "read", "entries", "tasks":
			text, err := tree.ReadFile(st.Path, root)
			got = string(text)
			switch st.Op {
			case "entries":
				got = strings.SplitAfter(got, "\n")[0]
			case "tasks":
				lines := strings.SplitAfter(mask.Replace(got), "\n")
				if st.Path == FileSavedTGIDs {
					slices.Sort(lines)
				}
				got = strings.Join(lines, "")
			}
			got += errName(err)
		case "write":
			got = errName(tree.WriteFile(st.Path, []byte(st.Arg), os.O_TRUNC, root))
		case "reg":
			idx, err := f.Register(s.NewProcess(newMem()), root, regArgs(st.Arg, check, 31, 4, 0))
			if err != nil {
				t.Fatalf("step %d: register %q: %v", i, st.Arg, err)
			}
			index = idx
			name, _, _ := strings.Cut(st.Arg, " ")
			got = errName(tree.WriteFile("events/user_events/"+name+"/enable", []byte("1"), 0, root))
		case "writes":
			w := Writer{PID: tids[st.CPU], TGID: pid, Comm: k.Comm, CPU: st.CPU}
			for n := range st.Count {
				var rec [8]byte
				binary.NativeEndian.PutUint32(rec[:], index)
				binary.NativeEndian.PutUint32(rec[4:], uint32(n))
				if _, err := f.Write(w, rec[:], 0); err != nil && got == "" {
					got = errName(err)
				}
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, st.Op)
		}
		if d, ok := fileDifferences[key]; ok {
			used[key] = true
			if got != d.ours {
				t.Errorf("step %d, %s: %q, want %q (the kernel's is %q: %s)", i, key, got, d.ours, want, d.why)
			}
			continue
		}
		if got != want {
			t.Errorf("step %d, %s: %q, the kernel's %q", i, key, got, want)
		}
	}
	for key := range fileDifferences {
		if !used[key] {
			t.Errorf("difference %q: no such step in the kernel's answers", key)
		}
	}
}

// TestHeaderPageIsTheRing: events/header_page says what the ring buffer's
// pages are, which readers of trace_pipe_raw parse by it (the sub-buffer
// size is data's offset and size).
func TestHeaderPageIsTheRing(t *testing.T) {
	want := fmt.Sprintf("\tfield: char data;\toffset:%d;\tsize:%d;\tsigned:0;\n", ftrace.PageHeaderSize, ftrace.PageCapacity)
	if !strings.HasSuffix(perfdata.HeaderPage, want) {
		t.Errorf("header_page %q does not end with %q", perfdata.HeaderPage, want)
	}
}
