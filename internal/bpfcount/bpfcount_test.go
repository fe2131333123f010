package bpfcount

import (
	"encoding/binary"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/uetrace/uetrace/userevents"
)

const tracefs = "/sys/kernel/tracing"

// The kernel tests need Linux's user_events and the right to load BPF
// programs: kernel/suites runs them in the 6.12 VM as root.
func needKernel(t *testing.T) *userevents.File {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: loading BPF programs")
	}
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel})
	if err != nil {
		t.Skipf("no user_events in this kernel: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// twoEvents registers the tests' two events on f.
func twoEvents(t *testing.T, f *userevents.File) (a, b *userevents.Event) {
	t.Helper()
	a, err := f.Register("bpfcount_a u32 v", 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = f.Register("bpfcount_b u64 w", 0); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// waitEnabled waits for the kernel to set the event's enable bit: a BPF
// program attached through perf is a consumer as perf is.
func waitEnabled(t *testing.T, ev *userevents.Event) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ev.Enabled() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never enabled", ev.Name())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMain is also the child of TestKernelCounts: a second process writing
// records of an event.
func TestMain(m *testing.M) {
	if n := os.Getenv("BPFCOUNT_CHILD_WRITES"); n != "" {
		f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel})
		if err != nil {
			os.Exit(2)
		}
		ev, err := f.Register("bpfcount_a u32 v", 0)
		if err != nil || !ev.Enabled() {
			os.Exit(3)
		}
		count, _ := strconv.Atoi(n)
		for i := range count {
			if ev.Write(binary.NativeEndian.AppendUint32(nil, uint32(i))) != nil {
				os.Exit(4)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKernelCounts attaches the counter to two user events and counts what
// this process and a child write, per event and per process, in the
// kernel.
func TestKernelCounts(t *testing.T) {
	a, b := twoEvents(t, needKernel(t))
	c, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"bpfcount_a", "bpfcount_b"} {
		if _, err := c.Attach(tracefs, "user_events", name); err != nil {
			t.Fatal(err)
		}
	}
	waitEnabled(t, a)
	waitEnabled(t, b)
	for i := range 100 {
		if err := a.Write(binary.NativeEndian.AppendUint32(nil, uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		if err := b.Write(binary.NativeEndian.AppendUint64(nil, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "BPFCOUNT_CHILD_WRITES=25")
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	counts, dropped, err := c.Counts()
	if err != nil {
		t.Fatal(err)
	}
	ida, idb := eventID(t, "bpfcount_a"), eventID(t, "bpfcount_b")
	me, kid := uint32(os.Getpid()), uint32(child.Process.Pid)
	want := map[Key]uint64{{ida, me}: 100, {idb, me}: 7, {ida, kid}: 25}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("count of event %d from pid %d: %d, want %d (all: %v)", k.ID, k.PID, counts[k], n, counts)
		}
	}
	if len(counts) != len(want) || dropped != 0 {
		t.Errorf("counts %v, %d dropped; want only %v", counts, dropped, want)
	}
}

// TestKernelFullMapCounted: with room for one key, the records of a
// second are counted as dropped, not lost.
func TestKernelFullMapCounted(t *testing.T) {
	a, b := twoEvents(t, needKernel(t))
	c, err := New(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Attach(tracefs, "user_events", "bpfcount_a")
	c.Attach(tracefs, "user_events", "bpfcount_b")
	waitEnabled(t, a)
	waitEnabled(t, b)
	a.Write(make([]byte, 4))
	for range 5 {
		b.Write(make([]byte, 8))
	}
	counts, dropped, err := c.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if counts[Key{eventID(t, "bpfcount_a"), uint32(os.Getpid())}] != 1 || dropped != 5 {
		t.Errorf("counts %v, %d dropped; want a's 1 and 5 dropped", counts, dropped)
	}
}

// TestKernelProgramSeesFields shows what the issue asks of eBPF on the
// kernel: a BPF program sees each record of a user event that userevents
// registered, fields and all — here it sums the u32 field v of every
// record, read from the record perf_tp_event is handed (the 8 bytes of
// common fields, then v: the format file's offset:8), and the sum is the
// values written.
func TestKernelProgramSeesFields(t *testing.T) {
	f := needKernel(t)
	ev, err := f.Register("bpfcount_a u32 v", 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(0) // for its counting perf events: the records reach perf_tp_event
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Attach(tracefs, "user_events", "bpfcount_a")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sum.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Kprobe, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{
			// perf_tp_event(event_type rdi, count rsi, record rdx, …)
			asm.LoadMem(asm.R2, asm.R1, regsDI, asm.DWord),
			asm.And.Imm(asm.R2, 0xffff),
			asm.JNE.Imm(asm.R2, int32(id), "out"),
			asm.LoadMem(asm.R3, asm.R1, 96, asm.DWord), // rdx: the record
			asm.Add.Imm(asm.R3, 8),
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, -8),
			asm.Mov.Imm(asm.R2, 0),
			asm.StoreMem(asm.RFP, -8, asm.R2, asm.DWord), // v's room, zeroed: 8 bytes, v in the low 4
			asm.Mov.Imm(asm.R2, 4),
			asm.FnProbeReadKernel.Call(),
			asm.LoadMem(asm.R6, asm.RFP, -8, asm.DWord),
			asm.StoreImm(asm.RFP, -12, 0, asm.Word),
			asm.LoadMapPtr(asm.R1, sum.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -12),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.StoreXAdd(asm.R0, asm.R6, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := link.Kprobe(Probe, prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	waitEnabled(t, ev)
	var want uint64
	for _, v := range []uint32{3, 40, 500, 0xffffffff} {
		ev.Write(binary.NativeEndian.AppendUint32(nil, v))
		want += uint64(v)
	}
	var got uint64
	if err := sum.Lookup(uint32(0), &got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the program summed %d, want %d", got, want)
	}
}

// TestKernelTracepointProgramNotRun records what makes the package use a
// kprobe: Linux 6.12 attaches a BPF tracepoint program to a user event
// (the event is enabled by it) and never runs it, since user_events' perf
// probe submits its records without trace_call_bpf(). Should a kernel run
// it, this test says so, and the package could attach to the tracepoint.
func TestKernelTracepointProgramNotRun(t *testing.T) {
	f := needKernel(t)
	ev, err := f.Register("bpfcount_a u32 v", 0)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer runs.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.TracePoint, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.LoadMapPtr(asm.R1, runs.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := link.Tracepoint("user_events", "bpfcount_a", prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	waitEnabled(t, ev)
	for range 10 {
		if err := ev.Write(make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	var n uint64
	if err := runs.Lookup(uint32(0), &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the tracepoint program ran %d times for 10 records: this kernel runs BPF on user events; attach to the tracepoint instead of the kprobe", n)
	}
}

// eventID reads an event's tracepoint id from tracefs.
func eventID(t *testing.T, name string) uint32 {
	t.Helper()
	b, err := os.ReadFile(tracefs + "/events/user_events/" + name + "/id")
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.Atoi(string(b[:len(b)-1]))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(id)
}
