// Package bpfcount counts the records of user events in the kernel, per
// event and per process, with a BPF program: what `uetrace top` needs on a
// kernel with user_events, without copying every record to user space as
// a perf ring would — the records are counted where they are written, in
// the writer's context, and only the counts are read.
//
// # Why a kprobe, not a tracepoint program
//
// Linux 6.12 never runs a BPF tracepoint program attached to a user event.
// Tracepoint programs run from perf_trace_run_bpf_submit(), which the
// perf probes of compiled-in tracepoints call; user_events' perf probe
// (user_event_perf in kernel/trace/trace_events_user.c) hands its record
// to perf with perf_trace_buf_submit(), which goes straight to
// perf_tp_event() — no trace_call_bpf(). Attaching succeeds and enables the
// event, and the program is never called (TestKernelTracepointProgramNotRun
// checks it on the kernel). So the counting program is a kprobe on
// perf_tp_event(u16 event_type, u64 count, void *record, int entry_size,
// …), which every tracepoint record delivered to perf passes through, the
// user event's among them: it counts the records whose event_type is one
// of the events asked for. A counting perf event (no samples, no ring) on
// each CPU makes the kernel deliver the user event's records to perf at
// all (user_event_perf runs only where the CPU's perf list is not empty).
//
// The program is a handful of instructions, assembled with cilium/ebpf's
// asm package rather than compiled from C: it takes the event type from
// the probe's first argument (x86-64's rdi), skips events not asked for,
// takes the writer's tgid from bpf_get_current_pid_tgid, and adds one to
// that (event, tgid) key's count in a per-CPU hash map — no atomics, no
// lock shared between CPUs. A full map counts the record in a slot of its
// own, so that nothing is lost silently.
//
// It needs x86-64, kprobes and BPF (CONFIG_KPROBES, CONFIG_BPF_EVENTS) and
// the right to load programs (CAP_BPF and CAP_PERFMON, or root): New says
// which is missing, and callers fall back to perf's rings.
package bpfcount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/perfring"
)

// Key is what a count is of: an event, by its tracepoint id, and the
// process (tgid) that wrote it.
type Key struct {
	ID  uint32
	PID uint32
}

// dropKey is the slot that counts records whose key found the map full.
var dropKey = Key{ID: ^uint32(0), PID: ^uint32(0)}

// Probe is the kernel function the program is attached to.
const Probe = "perf_tp_event"

// Counter is a loaded program and its maps; Attach adds events.
type Counter struct {
	counts, wanted *ebpf.Map
	prog           *ebpf.Program
	probe          link.Link
	perf           []int // the counting perf events, per event and CPU
}

// New loads the program, with a map of room for maxKeys (event, process)
// pairs (and the drop slot), and attaches it to perf_tp_event.
func New(maxKeys int) (*Counter, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("bpfcount: the probe reads x86-64's argument registers, not %s's: %w", runtime.GOARCH, unix.ENOTSUP)
	}
	if maxKeys <= 0 {
		maxKeys = 1 << 14
	}
	c := &Counter{}
	var err error
	c.counts, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "uetrace_counts", Type: ebpf.PerCPUHash, KeySize: 8, ValueSize: 8, MaxEntries: uint32(maxKeys + 1),
	})
	if err != nil {
		return nil, fmt.Errorf("bpfcount: the counts map: %w", err)
	}
	if c.wanted, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "uetrace_wanted", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 1 << 16,
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: the events map: %w", err)
	}
	// The drop slot exists from the start, so that a full map can still
	// count what it drops.
	if err := c.counts.Put(dropKey, make([]uint64, possibleCPUs())); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: the drop slot: %w", err)
	}
	if c.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "uetrace_count", Type: ebpf.Kprobe, License: "Dual MIT/GPL", Instructions: program(c.counts, c.wanted),
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: loading the program: %w", err)
	}
	if c.probe, err = link.Kprobe(Probe, c.prog, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: kprobe on %s: %w", Probe, err)
	}
	return c, nil
}

// x86-64's pt_regs: where the first argument, rdi, is.
const regsDI = 112

// program is the counting program:
//
//	key = {event_type (the first argument), tgid}
//	if wanted[key.id] == nil { return 0 }
//	if v := counts[key]; v != nil { *v += 1; return 0 }
//	if update(counts, key, 1, BPF_NOEXIST) != 0 {	// full, or this CPU raced itself (an NMI)
//		if v := counts[key]; v != nil { *v += 1 } else { counts[drop] += 1 }
//	}
func program(counts, wanted *ebpf.Map) asm.Instructions {
	const (
		keyOff  = -8 // the key on the stack: id at -8, tgid at -4
		oneOff  = -16
		dropOff = -24
	)
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, regsDI, asm.DWord),
		asm.And.Imm(asm.R2, 0xffff),
		asm.StoreMem(asm.RFP, keyOff, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, wanted.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "done"),

		asm.FnGetCurrentPidTgid.Call(),
		asm.RSh.Imm(asm.R0, 32),
		asm.StoreMem(asm.RFP, keyOff+4, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "add"),

		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, oneOff, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, keyOff),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, oneOff),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "done"),

		asm.LoadMapPtr(asm.R1, counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "add"),
		asm.Mov.Imm(asm.R1, -1),
		asm.StoreMem(asm.RFP, dropOff, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, dropOff),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "done"),

		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord).WithSymbol("add"),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("done"),
		asm.Return(),
	}
}

// Attach counts the records of the tracepoint system:name (its directory
// under tracefs): it opens a counting perf event on it on every CPU, so
// that the kernel hands its records to perf, and adds its id to the
// events the program counts. It returns the id.
func (c *Counter) Attach(tracefs, system, name string) (uint32, error) {
	b, err := os.ReadFile(filepath.Join(tracefs, "events", system, name, "id"))
	if err != nil {
		return 0, fmt.Errorf("bpfcount: %s:%s: %w", system, name, err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bpfcount: %s:%s: id %q: %w", system, name, b, unix.EINVAL)
	}
	for cpu := range runtime.NumCPU() {
		// Counting, not sampling: no sample is made, no ring written.
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}
		fd, err := perfring.Open(&attr, -1, cpu)
		if err != nil {
			return 0, fmt.Errorf("bpfcount: %s:%s: %w", system, name, err)
		}
		c.perf = append(c.perf, fd)
	}
	if err := c.wanted.Put(uint32(id), uint8(1)); err != nil {
		return 0, fmt.Errorf("bpfcount: %s:%s: %w", system, name, err)
	}
	return uint32(id), nil
}

// Counts reads the counts so far, each summed over the CPUs, and how many
// records found the map full and were not counted under their key.
func (c *Counter) Counts() (counts map[Key]uint64, dropped uint64, err error) {
	counts = map[Key]uint64{}
	var k Key
	var perCPU []uint64
	it := c.counts.Iterate()
	for it.Next(&k, &perCPU) {
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		if k == dropKey {
			dropped = n
			continue
		}
		counts[k] = n
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("bpfcount: reading the counts: %w", err)
	}
	return counts, dropped, nil
}

// Close detaches the program, closes the perf events and frees the maps.
func (c *Counter) Close() error {
	var errs []error
	if c.probe != nil {
		errs = append(errs, c.probe.Close())
	}
	for _, fd := range c.perf {
		errs = append(errs, unix.Close(fd))
	}
	if c.prog != nil {
		errs = append(errs, c.prog.Close())
	}
	for _, m := range []*ebpf.Map{c.counts, c.wanted} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

func possibleCPUs() int {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 {
		return 1
	}
	return n
}
