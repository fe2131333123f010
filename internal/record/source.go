package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/perfdata"
)

// SampleType is what every recorded sample carries: perf record's choice
// for tracepoints, less the IP and period that mean nothing for them.
// PERF_SAMPLE_IDENTIFIER puts the sample id first, where any reader finds
// it whatever the attribute.
const SampleType = perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime |
	perfdata.SampleCPU | perfdata.SampleRaw

// source is where records come from.
type source interface {
	// readFile reads a tracefs file.
	readFile(name string) ([]byte, error)
	// attach starts sampling ev and sets its attribute and sample ids.
	attach(ev *event) error
	// wait returns when records may be waiting, or after d.
	wait(d time.Duration)
	// drain gives every waiting record to k.
	drain(k sink) error
	// stop stops sampling; records already taken can still be drained.
	stop()
	close() error
}

// sink takes what a source drains.
type sink interface {
	// record takes a perf record as a perf ring holds it (and perf.data
	// stores it): struct perf_event_header and a body laid out by
	// SampleType, with sample_id_all trailers.
	record(rec []byte)
	// sample takes a sample of a source that is not a perf ring.
	sample(s *perfdata.Sample)
	// lost takes n records of the event instance with sample id id that
	// were dropped; at, when not nil, is the sample_id_all trailer of
	// where (the time and CPU of the first of them).
	lost(id, n uint64, at *perfdata.Sample)
	// comm takes the name of task tid of process pid, which holds from
	// the time of trailer, a sample_id_all trailer.
	comm(pid, tid uint32, name string, trailer *perfdata.Sample)
	// records takes a run of finished records of a daemon session's
	// stream, as it lies (source_stream.go).
	records(b []byte)
}

// ---- kernel ----

// kernelSource samples with perf_event_open(PERF_TYPE_TRACEPOINT) on every
// online CPU for every task, like perf record -a, with one ring per CPU
// that every event's records go to (PERF_EVENT_IOC_SET_OUTPUT).
type kernelSource struct {
	root  string
	cpus  []int
	pages int
	rings []*perfring.Ring // by index in cpus; nil until the first event
	fds   []int            // every event fd that does not own a ring
	all   []int            // every event fd, ring owners included
	poll  []unix.PollFd

	monotonic bool // Options.ClockMonotonic
	// tracking: tasks' names and lives are reported (PERF_RECORD_COMM,
	// FORK, EXIT), which a file, a sink, a count per process or a filter
	// by name needs — by the first event, as perf record's first event
	// does, or, with tracker, by a dummy software event of their own
	// that owns the rings (perf's tracking "dummy" event). The kernel
	// counts a tracking record its full ring had no room for in the
	// tracking event's PERF_FORMAT_LOST: with a tracker, the events'
	// lost counts are their samples' alone, which uetrace top shows per
	// event. A file's recording tracks by its first event, which the
	// file's attrs describe (a tracker would be one more, which perf's
	// tools would list).
	tracking  bool
	tracker   bool
	stopped   bool
	lostSeen  uint64 // counted by PERF_RECORD_LOST records read so far
	lostFinal bool   // the final lost count has been settled
}

func newKernelSource(root string, bufferKB int) (*kernelSource, error) {
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	pg := os.Getpagesize()
	pages := 1
	for pages*pg < bufferKB<<10 {
		pages *= 2
	}
	return &kernelSource{root: root, cpus: cpus, pages: pages, rings: make([]*perfring.Ring, len(cpus))}, nil
}

func (k *kernelSource) path(name string) string {
	return filepath.Join(k.root, filepath.FromSlash(name))
}

func (k *kernelSource) readFile(name string) ([]byte, error) { return os.ReadFile(k.path(name)) }

// setFilter is PERF_EVENT_IOC_SET_FILTER.
func setFilter(fd int, filter string) error {
	b := append([]byte(filter), 0)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(b)
	if errno != 0 {
		return errno
	}
	return nil
}

func (k *kernelSource) attach(ev *event) error {
	if k.rings[0] == nil && k.tracking && k.tracker && k.openTracker() != nil {
		// The dummy event could not be opened: the first event
		// tracks, as a file's recording's does.
		k.tracker = false
	}
	ringBytes := k.pages * os.Getpagesize()
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Config:      uint64(ev.id),
		Sample:      1,
		Sample_type: SampleType,
		// Wake the reader when half the ring is full rather than per record:
		// the batching that keeps a busy recording cheap.
		Bits:   unix.PerfBitSampleIDAll | unix.PerfBitWatermark | unix.PerfBitDisabled,
		Wakeup: uint32(ringBytes / 2),
		// Each event's own count of the samples its ring had no room for,
		// read at the end: the kernel reports a full ring's losses as a
		// PERF_RECORD_LOST only with its next record, which may never come.
		Read_format: unix.PERF_FORMAT_LOST,
	}
	if k.monotonic {
		attr.Bits |= unix.PerfBitUseClockID
		attr.Clockid = unix.CLOCK_MONOTONIC
	}
	if k.rings[0] == nil && k.tracking {
		// The first event also reports new task names (exec, prctl) and
		// the tasks made and ended, as perf record's tracking event does:
		// a thread made during the recording is named after its parent.
		attr.Bits |= unix.PerfBitComm | unix.PerfBitTask
	}
	var opened []int
	var ids []uint64
	fail := func(err error) error {
		for _, fd := range opened {
			unix.Close(fd)
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (recording every task's events needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ -1)", err)
		}
		return fmt.Errorf("record %s:%s: %w", ev.system, ev.name, err)
	}
	for i, cpu := range k.cpus {
		fd, err := perfring.Open(&attr, -1, cpu)
		if err != nil {
			return fail(err)
		}
		opened = append(opened, fd)
		if ev.filter != "" {
			// Each CPU's perf event gets the filter before any is
			// enabled.
			if err := setFilter(fd, ev.filter); err != nil {
				return fail(fmt.Errorf("filter %q: %w (see \"Event filtering\" in the kernel's Documentation/trace/events.rst)", ev.filter, err))
			}
		}
		id, err := perfring.ID(fd)
		if err != nil {
			return fail(err)
		}
		ids = append(ids, id)
		if k.rings[i] == nil {
			continue
		}
		if err := perfring.SetOutput(fd, k.rings[i].FD); err != nil {
			return fail(err)
		}
	}
	for i, fd := range opened {
		if k.rings[i] != nil {
			k.fds = append(k.fds, fd)
			continue
		}
		r, err := perfring.NewRing(fd, k.pages)
		if err != nil {
			// Rings made in this loop keep their fds; only the rest go.
			return fail(err)
		}
		k.rings[i] = r
		k.poll = append(k.poll, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	k.all = append(k.all, opened...)
	// Opening the first CPU's event set the writers' enable bit
	// (user_event_reg acts on TRACE_REG_PERF_REGISTER, at open, and
	// ignores PERF_ADD); a record written on a CPU whose event is not yet
	// enabled reaches no perf event and is dropped without a count.
	// Enabling them all only now, with their output set up, keeps that
	// window to these few syscalls.
	for _, fd := range opened {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			return fmt.Errorf("record %s:%s: PERF_EVENT_IOC_ENABLE: %w", ev.system, ev.name, err)
		}
	}
	ev.attr = attr
	ev.attr.Bits &^= unix.PerfBitDisabled
	ev.ids = ids
	ev.fds = opened
	return nil
}

// eventLost is the number of ev's samples that had no room in the rings,
// as its perf events count them (PERF_FORMAT_LOST). The PERF_RECORD_LOST
// records do not tell: the kernel counts a ring's losses per ring and
// reports them under whichever event writes next.
func (k *kernelSource) eventLost(ev *event) uint64 {
	var total uint64
	var buf [16]byte // u64 value, u64 lost
	for _, fd := range ev.fds {
		if n, err := unix.Read(fd, buf[:]); err == nil && n == len(buf) {
			total += ne.Uint64(buf[8:])
		}
	}
	return total
}

// openTracker opens the tracking event on each CPU — a dummy software
// event that samples nothing and reports tasks' names and lives — and
// makes its rings the ones every event writes into.
func (k *kernelSource) openTracker() error {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_DUMMY,
		Sample:      1,
		Sample_type: SampleType, // the events' trailers (sample_id_all) alike
		Bits:        unix.PerfBitSampleIDAll | unix.PerfBitWatermark | unix.PerfBitComm | unix.PerfBitTask,
		Wakeup:      uint32(k.pages * os.Getpagesize() / 2),
		Read_format: unix.PERF_FORMAT_LOST,
	}
	if k.monotonic {
		attr.Bits |= unix.PerfBitUseClockID
		attr.Clockid = unix.CLOCK_MONOTONIC
	}
	for i, cpu := range k.cpus {
		fd, err := perfring.Open(&attr, -1, cpu)
		if err == nil {
			var r *perfring.Ring
			if r, err = perfring.NewRing(fd, k.pages); err == nil {
				k.rings[i] = r
				k.poll = append(k.poll, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
				k.all = append(k.all, fd)
				continue
			}
			unix.Close(fd)
		}
		// The rings made so far go; the first event tracks instead.
		for j := range i {
			k.rings[j].Close()
			k.rings[j] = nil
		}
		k.poll, k.all = k.poll[:0], k.all[:0]
		return err
	}
	return nil
}

func (k *kernelSource) wait(d time.Duration) {
	if len(k.poll) == 0 {
		time.Sleep(d)
		return
	}
	_, _ = unix.Poll(k.poll, int(d/time.Millisecond))
}

func (k *kernelSource) drain(to sink) error {
	count := func(rec []byte) {
		if ne.Uint32(rec) == perfdata.RecordLost && len(rec) >= 24 {
			k.lostSeen += ne.Uint64(rec[16:])
		}
		to.record(rec)
	}
	for _, r := range k.rings {
		if r != nil {
			r.Read(count)
		}
	}
	if k.stopped && !k.lostFinal {
		k.lostFinal = true
		return k.settleLost(to)
	}
	return nil
}

// settleLost reports the samples the events counted as lost
// (PERF_FORMAT_LOST) that no LOST record in the rings reported.
func (k *kernelSource) settleLost(to sink) error {
	var total uint64
	var buf [16]byte // u64 value, u64 lost
	for _, fd := range k.all {
		n, err := unix.Read(fd, buf[:])
		if err != nil || n != len(buf) {
			return fmt.Errorf("read perf event's lost count: %v (%d bytes)", err, n)
		}
		total += ne.Uint64(buf[8:])
	}
	if total > k.lostSeen {
		var id uint64
		if len(k.all) > 0 {
			id, _ = perfring.ID(k.all[0])
		}
		to.lost(id, total-k.lostSeen, nil)
	}
	return nil
}

func (k *kernelSource) stop() {
	for _, fd := range k.all {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	k.stopped = true
}

func (k *kernelSource) close() error {
	for _, fd := range k.fds {
		unix.Close(fd)
	}
	k.fds = nil
	for i, r := range k.rings {
		if r != nil {
			r.Close()
			k.rings[i] = nil
		}
	}
	return nil
}

// ---- daemon ----

// daemonSource reads a uetrace daemon's session and turns its records into
// the perf records the kernel would have made.
type daemonSource struct {
	monotonic bool // Options.ClockMonotonic: the attrs say CLOCK_MONOTONIC
	c         *client.Conn
	s         *client.Session
	recs      []client.Record
	smp       perfdata.Sample
	lost      uint64        // the session's lost count so far
	big       atomic.Uint64 // the session's too-large count so far
	byType    map[int]*event
	unknown   func(typeID int) *event // called for a type id not yet attached
	idle      int
	// names are task names the session gave, by tid, waiting for the
	// task's next sample: its trailer names the event it belongs to.
	names map[int32]string
	// streams are the session's streams (source_stream.go); nil when
	// the session is read over the socket.
	streams *streamState
	noRing  bool  // Options.SessionSocket
	ringErr error // why the session is read over the socket
}

func newDaemonSource(c *client.Conn, bufferKB int, noRing bool) (*daemonSource, error) {
	s, err := c.NewSession(client.SessionOptions{BufferBytes: bufferKB << 10, Comm: true})
	if err != nil {
		return nil, fmt.Errorf("daemon session: %w", err)
	}
	d := &daemonSource{c: c, s: s, byType: make(map[int]*event), names: make(map[int32]string), noRing: noRing}
	d.shareStreams(bufferKB << 10)
	return d, nil
}

func (d *daemonSource) readFile(name string) ([]byte, error) {
	f, err := d.c.Open(name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// attachPatterns attaches the session to what the patterns select, now and
// (with follow) later: the daemon does the following itself.
func (d *daemonSource) attachPatterns(pats []Pattern, follow bool) error {
	for _, p := range pats {
		if _, err := d.s.Attach(p.text, follow); err != nil {
			return fmt.Errorf("attach %s: %w", p.text, err)
		}
	}
	return nil
}

// attach gives ev its attribute; the session is already attached to it.
func (d *daemonSource) attach(ev *event) error {
	ev.attr = unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Config:      uint64(ev.id),
		Sample:      1,
		Sample_type: SampleType,
		Bits:        unix.PerfBitSampleIDAll,
	}
	if d.monotonic {
		// The daemon's times are CLOCK_MONOTONIC always; the file says so.
		ev.attr.Bits |= unix.PerfBitUseClockID
		ev.attr.Clockid = unix.CLOCK_MONOTONIC
	}
	// One sample id per event (the daemon's, as its streams carry it);
	// the kernel's are per event and CPU.
	ev.ids = []uint64{wire.SampleID(ev.id)}
	if ev.filter != "" {
		if err := d.s.SetFilter(ev.system+":"+ev.name, ev.filter); err != nil {
			return fmt.Errorf("record %s:%s: filter %q: %w", ev.system, ev.name, ev.filter, err)
		}
	}
	d.byType[ev.id] = ev
	return nil
}

func (d *daemonSource) wait(timeout time.Duration) {
	if d.streams != nil {
		d.streamWait(timeout)
		return
	}
	// Polling the session costs a round trip; back off while it is empty.
	if d.idle > 0 {
		time.Sleep(time.Duration(min(d.idle, 10)) * time.Millisecond)
	}
}

func (d *daemonSource) drain(to sink) error {
	if d.streams != nil {
		return d.streamDrain(to)
	}
	for {
		recs, lost, big, err := d.s.Poll(d.recs[:0])
		if err != nil {
			return fmt.Errorf("daemon session: %w", err)
		}
		d.recs = recs
		// The session's drops are not per event; perf readers file a LOST
		// record under the event whose id it carries, so give it one.
		if lost > d.lost {
			to.lost(d.anyID(), lost-d.lost, nil)
			d.lost = lost
		}
		if old := d.big.Load(); big > old {
			to.lost(d.anyID(), big-old, nil)
			d.big.Store(big)
		}
		if len(recs) == 0 {
			d.idle++
			return nil
		}
		d.idle = 0
		for i := range recs {
			d.take(to, &recs[i])
		}
	}
}

// take gives one record of the session to k: a task's name is kept for
// the task's next sample, whose trailer names the event it belongs to.
func (d *daemonSource) take(to sink, r *client.Record) {
	if r.ID == 0 { // a task's name
		name := r.Raw
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		d.names[r.TID] = string(name)
		return
	}
	ev := d.byType[r.ID]
	if ev == nil && d.unknown != nil {
		ev = d.unknown(r.ID)
	}
	var sid uint64 // 0: an event whose format could not be read
	if ev != nil {
		sid = ev.ids[0]
	}
	d.smp = perfdata.Sample{
		ID: sid, PID: uint32(r.PID), TID: uint32(r.TID), Time: r.TS, CPU: uint32(r.CPU), Raw: r.Raw,
	}
	if len(d.names) > 0 && sid != 0 { // no map lookup per sample otherwise
		if name, ok := d.names[r.TID]; ok {
			delete(d.names, r.TID)
			tr := d.smp
			tr.Raw = nil
			to.comm(uint32(r.PID), uint32(r.TID), name, &tr)
		}
	}
	to.sample(&d.smp)
}

// anyID is the lowest sample id of an attached event.
func (d *daemonSource) anyID() uint64 {
	var id uint64
	for _, ev := range d.byType {
		if id == 0 || ev.ids[0] < id {
			id = ev.ids[0]
		}
	}
	return id
}

func (d *daemonSource) stop() {
	if d.streams != nil {
		d.streams.stopped = true
	}
}

func (d *daemonSource) close() error {
	if d.streams != nil {
		d.streams.hand.stop()
	}
	err := d.s.Close()
	if d.streams != nil {
		d.streams.st.Close()
	}
	return err
}

var ne = binary.NativeEndian

// taskComm reads a task's name from /proc, as perf record does for the
// tasks that were running before it started.
func taskComm(pid, tid int32) (string, bool) {
	comm, err := procfs.ThreadComm(int(pid), int(tid))
	return comm, err == nil
}
