package ftrace

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// SavedCmdlines is how many tasks saved_cmdlines remembers: Linux 6.12's
// saved_cmdlines_size on x86-64. The kernel asks for 128
// (SAVED_CMDLINES_DEFAULT) and rounds up to what its allocation holds —
// the pid map of PID_MAX_DEFAULT+1 entries and 6552 slots of a comm and a
// pid fill 64 pages (allocate_cmdlines_buffer).
const SavedCmdlines = 6552

// pidMaxDefault is PID_MAX_DEFAULT: saved_cmdlines maps a pid by its low
// bits, pid & (pidMaxDefault-1).
const pidMaxDefault = 0x8000

// tasks is what saved_cmdlines and saved_tgids show
// (kernel/trace/trace_sched_switch.c): the command name, and with the
// record-tgid option the process id, of the tasks that wrote records.
//
// The kernel saves them at the next context switch on a CPU that
// committed a record (trace_taskinfo_save, tracing_record_taskinfo): the
// writer, and the task switched to, whatever it is. Here they are saved
// when the record is committed, and only the writer's: a task that wrote
// nothing is not listed.
type tasks struct {
	// recordCmd and recordTGID are the record-cmd (on by default) and
	// record-tgid (off) trace options; gen counts their changes, so that
	// a CPU's memory of what it last saved (cpuBuffer.task) is not
	// trusted across one.
	recordCmd, recordTGID atomic.Bool
	gen                   atomic.Uint32

	mu sync.Mutex
	// The saved_cmdlines_buffer: pidToSlot[pid&(pidMaxDefault-1)] is the
	// slot a pid's comm is in (0 for none, slots counting from 1), and
	// slots the pid and comm in each. Slots are handed out round-robin
	// from 1, as cmdline_idx does; a pid whose low bits are another's
	// takes that one's slot. Both are made at the first save.
	pidToSlot []uint16
	slots     []savedTask
	last      int // the slot handed out last (cmdline_idx)
	// tgids is tgid_map: each pid's process id, once record-tgid saved
	// one. The kernel keeps an array of pid_max entries; this holds the
	// pids saved, at most one per pid.
	tgids map[int32]int32
}

type savedTask struct {
	pid  int32
	comm string
}

// lastTask is what a CPU last saved, so that a writer's records after its
// first save nothing more.
type lastTask struct {
	pid, tgid int32
	comm      string
	gen       uint32
	ok        bool
}

func newTasks() *tasks {
	t := &tasks{}
	t.recordCmd.Store(true)
	return t
}

// saveIfNew saves the writer of a record committed on c unless it is what
// c saved last. The caller holds c.mu.
func (t *tasks) saveIfNew(c *cpuBuffer, pid, tgid int32, comm string) {
	gen := t.gen.Load()
	l := &c.task
	if l.ok && l.pid == pid && l.tgid == tgid && l.gen == gen && l.comm == comm {
		return
	}
	*l = lastTask{pid: pid, tgid: tgid, comm: comm, gen: gen, ok: true}
	t.save(pid, tgid, comm)
}

// save is trace_save_cmdline and trace_save_tgid for one task. The idle
// task (pid 0) is not saved.
func (t *tasks) save(pid, tgid int32, comm string) {
	if pid <= 0 {
		return
	}
	cmd, tg := t.recordCmd.Load(), t.recordTGID.Load()
	if !cmd && !tg {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cmd {
		if t.pidToSlot == nil {
			t.pidToSlot = make([]uint16, pidMaxDefault)
			t.slots = make([]savedTask, SavedCmdlines+1)
		}
		tp := pid & (pidMaxDefault - 1)
		i := int(t.pidToSlot[tp])
		if i == 0 {
			t.last = t.last%SavedCmdlines + 1
			i = t.last
			t.pidToSlot[tp] = uint16(i)
		}
		t.slots[i] = savedTask{pid, comm}
	}
	if tg && tgid > 0 {
		if t.tgids == nil {
			t.tgids = make(map[int32]int32)
		}
		t.tgids[pid] = tgid
	}
}

// setOption sets record-cmd or record-tgid.
func (t *tasks) setOption(opt *atomic.Bool, on bool) {
	if opt.Swap(on) != on {
		t.gen.Add(1)
	}
}

// appendCmdlines appends saved_cmdlines (saved_cmdlines_show): "%d %s\n"
// for each slot, in slot order. A comm longer than the kernel's 15 bytes
// (TASK_COMM_LEN) is cut there.
func (t *tasks) appendCmdlines(dst []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := 1; i < len(t.slots); i++ {
		s := t.slots[i]
		if s.pid == 0 {
			continue
		}
		dst = strconv.AppendInt(dst, int64(s.pid), 10)
		dst = append(dst, ' ')
		dst = append(dst, s.comm[:min(len(s.comm), 15)]...)
		dst = append(dst, '\n')
	}
	return dst
}

// appendTGIDs appends saved_tgids (saved_tgids_show): "%d %d\n" for each
// pid with a saved process id, in pid order.
func (t *tasks) appendTGIDs(dst []byte) []byte {
	t.mu.Lock()
	pids := make([]int32, 0, len(t.tgids))
	for pid := range t.tgids {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		dst = strconv.AppendInt(dst, int64(pid), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(t.tgids[pid]), 10)
		dst = append(dst, '\n')
	}
	t.mu.Unlock()
	return dst
}

// SetRecordCmd sets the record-cmd trace option (on by default): whether
// writers are saved for saved_cmdlines.
func (r *Ring) SetRecordCmd(on bool) { r.tasks.setOption(&r.tasks.recordCmd, on) }

// RecordCmd reports the record-cmd option.
func (r *Ring) RecordCmd() bool { return r.tasks.recordCmd.Load() }

// SetRecordTGID sets the record-tgid trace option (off by default):
// whether writers' process ids are saved for saved_tgids. What was saved
// stays when it is turned off, as the kernel keeps its tgid_map.
func (r *Ring) SetRecordTGID(on bool) { r.tasks.setOption(&r.tasks.recordTGID, on) }

// RecordTGID reports the record-tgid option.
func (r *Ring) RecordTGID() bool { return r.tasks.recordTGID.Load() }

// AppendSavedCmdlines appends the text of saved_cmdlines: "pid comm" of
// the writers saved, at most SavedCmdlines of them, the oldest slots
// taken over by newer writers.
func (r *Ring) AppendSavedCmdlines(dst []byte) []byte { return r.tasks.appendCmdlines(dst) }

// AppendSavedTGIDs appends the text of saved_tgids: "pid tgid" of the
// writers saved while record-tgid was on, by pid.
func (r *Ring) AppendSavedTGIDs(dst []byte) []byte { return r.tasks.appendTGIDs(dst) }
