package record

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/perfdata"
)

// A daemon session's records come through its streams when the daemon
// offers them (client.Session.ShareStreams): one per ring index of the
// daemon's, each holding finished perf.data records — samples, PERF_RECORD_LOST
// where records were lost, PERF_RECORD_COMM before a thread's first
// sample in it — which the daemon's drainers write as they deliver, as the
// kernel writes perf's per-CPU mmap rings. The recording takes each
// stream's bytes between its tail and the head as they lie and hands them
// to the file in one piece (Recorder.records): it walks their headers for
// its counts, and copies the bytes into the file writer's chunk, which
// goes to the disk with O_DIRECT where the file system takes it — once
// for a run longer than a sixteenth of perfdata.Writer's buffer (64 KiB),
// through that buffer (twice) for a shorter one.
// With a task filter, a Sink or per-process counts, each record is looked
// at and written on its own, as a kernel ring's.
//
// The streams of different CPUs are not in time order with each other:
// perf's readers sort by time within the rounds PERF_RECORD_FINISHED_ROUND
// closes, which hold that every record after the round before last is
// later than every record before it. A stream has what its drainer has
// delivered, and a drainer may hold records for up to its busy wait
// (internal/daemon): so a round ends only after the daemon delivered
// everything published before (SessionSync), every streamRound.
//
// A daemon without streams, or one that refuses them, is read over its
// socket.

// streamRound is how often the recording has the daemon deliver what was
// published and ends a round (see above).
const streamRound = 100 * time.Millisecond

// streamWaitMax bounds a wait on the streams: records below the watermark
// wait no longer.
const streamWaitMax = 10 * time.Millisecond

// streamState is the session's streams and what the end of the recording
// settles.
type streamState struct {
	st        *client.SessionStreams
	watermark uint32 // the bytes a stream holds before the reader is woken
	// latency, when set (Options.SinkLatency), is how long records may
	// wait in the streams while they fill slowly: taken is what the
	// takes since the last wait found (streamWait).
	latency  time.Duration
	taken    int
	size     int              // a stream's size
	waits    [2]atomic.Uint64 // the waits on the timer and on the streams
	stopped  bool             // the recording is stopping
	settled  bool             // the final drain is done
	lastSync time.Time
	round    bool       // delivered up to a sync since the last round ended
	err      error      // a sync's
	hand     handedSets // the producers' ring sets the daemon handed over (source_handover.go)
}

// shareStreams asks the daemon for the session's streams, each of about
// bytes/R (at least a page; rounded up to a power of two by the daemon),
// unless told not to. A daemon that cannot give them leaves the session
// as it was (it answered before it changed anything): the session is then
// read over the socket, and ringErr says why.
func (d *daemonSource) shareStreams(bytes int) bool {
	if d.noRing || d.c.Rings() == 0 {
		return false
	}
	st, err := d.s.ShareStreams(min(bytes/d.c.Rings(), wire.MaxSessionRing))
	if err != nil {
		d.ringErr = err
		return false
	}
	size := st.Reader(0).Size()
	d.streams = &streamState{st: st, watermark: uint32(size / 4), size: size, lastSync: time.Now()}
	return true
}

// streamWait waits for a stream to hold its watermark, at most timeout
// (and streamWaitMax, and the latency when there is one) — or, with a
// latency, while the streams fill slowly, sleeps that long on a timer.
//
// Why a timer: a goroutine that waits in futex(2) holds its thread, and
// the thread its P, in a system call; Go's sysmon sleeps deeply only
// while every P is idle, is woken from that sleep by each entry into a
// system call, and after it takes the P of a thread that stayed in one,
// or is woken so, polls every 20 µs for a millisecond (runtime/proc.go,
// sysmon, retake, entersyscall). A goroutine asleep on a timer is parked,
// and the program idle:
// the userevents receiver taking 100 000 events/s spent 5.6 % of its CPU
// in sysmon woken at each delivery (watermark 1), 10 % waiting in futex(2)
// for 10 ms at a time, and 1.2 % sleeping on a timer (perf record -g of
// the Collector, BENCHMARKS.md). The timer cannot be woken early, so it
// is used only while the streams fill slowly: when the takes since the
// last wait and what the streams hold now (written while the last take
// was given to Sink) come to less than a sixteenth of a stream. Records
// are lost then only if a burst fills a whole stream within one latency —
// 16 times the rate of the wait before; with the default 16 MiB on two
// CPUs, streams of 8 MiB, 800 MB/s — and what is lost is counted (LOST
// records), as always.
func (d *daemonSource) streamWait(timeout time.Duration) {
	st := d.streams
	t := min(timeout, streamWaitMax)
	if st.latency > 0 {
		t = min(t, st.latency)
	}
	if st.latency > 0 && st.taken+st.held() < st.size/16 {
		st.waits[0].Add(1)
		time.Sleep(t)
	} else if d.handWait(t) {
		// The readers of handed sets wake it with what they laid out;
		// the streams' records are read when it wakes, at most t later.
		st.waits[1].Add(1)
	} else {
		st.waits[1].Add(1)
		st.st.Wait(st.watermark, t)
	}
	st.taken = 0
}

// held is what the streams hold now: the sum of their Available.
func (st *streamState) held() int {
	n := 0
	for k := range st.st.Len() {
		n += len(st.st.Reader(k).Available())
	}
	return n
}

// streamDrain gives to what the streams hold, and every streamRound has
// the daemon deliver what was published and takes that too, so that a
// round may end. Once the recording stops it settles: it empties the
// streams, has the daemon deliver what producers published before now and
// hand over the losses it could not write into them, and empties them
// again.
func (d *daemonSource) streamDrain(to sink) error {
	st := d.streams
	if st.stopped && !st.settled {
		st.settled = true
		d.streamTake(to)
		d.streamSync(to)
		d.handFlushLost(to)
		return st.err
	}
	if d.streamTake(to) > 0 && time.Since(st.hand.asked) >= handAskEvery {
		// A producer whose records came through the daemon: it may be
		// one that came after the recording began, which is handed over
		// now rather than at the round's end (handAskEvery says why).
		d.askHandOvers()
	}
	if time.Since(st.lastSync) >= streamRound {
		d.streamSync(to)
	}
	if err := st.err; err != nil {
		st.err = nil
		return err
	}
	return nil
}

// streamSync has the daemon deliver what was published before, takes it,
// and counts what the daemon handed over.
func (d *daemonSource) streamSync(to sink) {
	st := d.streams
	// The handed sets first, then the sync: a set the daemon took back
	// meanwhile — from a reader in the middle of a pass, its records
	// given back — has its records delivered into the streams by the
	// sync, in this round.
	d.handTake(to, true)
	lost, big, err := st.st.Sync()
	st.lastSync = time.Now()
	if err != nil {
		st.err = fmt.Errorf("daemon session: %w", err)
		return
	}
	d.streamTake(to)
	st.round = true
	if !st.stopped {
		d.askHandOvers()
	}
	// The too-large count is the session's whole; the records it counts
	// are in the streams' LOST records, or in lost.
	d.big.Store(big)
	if lost > 0 {
		to.lost(d.anyID(), lost, nil)
	}
}

// streamTake gives to what each stream holds now, and frees it, and
// reports the streams' bytes it took (not the handed sets'). A stream
// whose head the daemon moved past what the stream can hold shows nothing
// (shmring.StreamReader.Available) and never will again: that is the
// daemon's fault, and the recording stops with it rather than wait for
// records that cannot come.
func (d *daemonSource) streamTake(to sink) int {
	d.handTake(to, false)
	took := 0
	for k := range d.streams.st.Len() {
		r := d.streams.st.Reader(k)
		if b := r.Available(); len(b) > 0 {
			to.records(b)
			r.Consume(len(b))
			d.streams.taken += len(b)
			took += len(b)
		} else if r.BadHead() > 0 && d.streams.err == nil {
			d.streams.err = fmt.Errorf("daemon session stream %d: its head is more than the stream's %d bytes past what was read: %w", k, r.Size(), errMalformed)
		}
	}
	return took
}

// roundDone says whether the records taken since the last round ended
// include everything published before a sync: a round may end.
func (d *daemonSource) roundDone() bool {
	if d.streams == nil {
		return true
	}
	done := d.streams.round
	d.streams.round = false
	return done
}

// records takes a run of finished perf.data records of a daemon session's
// stream — samples laid out by SampleType, PERF_RECORD_LOST and
// PERF_RECORD_COMM with sample_id_all trailers — and writes them as they
// lie: their headers walked for the counts, the run handed to the file in
// one piece. With a task filter, a Sink or per-process counts each record
// is taken on its own (record).
func (r *Recorder) records(b []byte) {
	if r.err != nil {
		return
	}
	whole := r.w != nil && r.filter == nil && !r.sinking && r.procs == nil
	// The counts of a run are added once, at its end: a stream's records
	// come in long runs of one event, and an atomic add and a map lookup
	// per sample were most of what a recording spent on a record.
	var samples, runN uint64
	var run *event // the event of the run of samples being counted
	runID := ^uint64(0)
	for p := b; len(p) > 0; {
		n := 0
		if len(p) >= 8 {
			n = int(ne.Uint16(p[6:]))
		}
		if n < 8 || n%8 != 0 || n > len(p) {
			r.err = fmt.Errorf("daemon session stream: a record of %d bytes with %d left: %w", n, len(p), errMalformed)
			break
		}
		rec := p[:n]
		p = p[n:]
		typ := perfdata.RecordType(ne.Uint32(rec))
		if typ == perfdata.RecordSample && n >= 24 {
			if id := ne.Uint64(rec[8:]); id != runID {
				if runN > 0 {
					run.samples.Add(runN)
				}
				runID, run, runN = id, r.byID[id], 0
				if run == nil {
					// An event attached after the start: its attr first.
					r.resolveType(wire.TypeID(id))
					run = r.byID[id]
				}
			}
		}
		if !whole {
			r.record(rec)
			continue
		}
		switch typ {
		case perfdata.RecordSample:
			if n >= 24 {
				if run != nil {
					runN++
				}
				samples++
			}
		case perfdata.RecordLost:
			if n >= 24 {
				r.countLost(ne.Uint64(rec[16:]))
			}
		case perfdata.RecordComm:
			if n >= 16 {
				tid := ne.Uint32(rec[12:])
				r.tasks[tid] = struct{}{}
				r.renamed(ne.Uint32(rec[8:]), tid, commName(rec))
			}
		}
	}
	if runN > 0 {
		run.samples.Add(runN)
	}
	if samples > 0 {
		r.samples.Add(samples)
	}
	if whole && r.err == nil {
		r.check(r.w.WriteRecords(b))
	}
}

// commName is the name a PERF_RECORD_COMM carries: from byte 16 to its NUL.
func commName(rec []byte) string {
	name := rec[16:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name)
}

// errMalformed is a session stream that breaks its format: the daemon's
// fault, never a producer's.
var errMalformed = errors.New("malformed")
