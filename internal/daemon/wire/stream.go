package wire

import (
	"encoding/binary"
	"math"
)

// The records of a session's streams (SessionStreams): finished perf.data
// records, laid out as perf.data stores them and as the kernel writes them
// into perf's mmap rings — the daemon writes them, one stream per ring
// index (internal/shmring's streams), and the reader writes them to its
// file as they lie, without looking at them. Their attr, which the reader
// writes into the file's header, is an event's PERF_TYPE_TRACEPOINT with
// StreamSampleType and sample_id_all; an event's samples carry the sample
// id SampleID(its type id). All integers are in the machine's byte order.
//
//	PERF_RECORD_SAMPLE  header (misc 0), identifier, pid/tid, time,
//	                    cpu/0, u32 raw size, the raw record — the 8-byte
//	                    common header and the payload — and its padding
//	                    to 8 bytes, counted in the raw size as the kernel
//	                    counts it (perf_sample_save_raw_data; SampleSize).
//	                    The padding is zeros here; the kernel skips it
//	                    (__output_skip), leaving what perf's ring held.
//	PERF_RECORD_LOST    header, the sample id of the event of the first
//	                    record lost (0: not an event's), the count, and the
//	                    sample_id trailer of the first record lost: pid/tid,
//	                    time, cpu/0, identifier (LostSize).
//	PERF_RECORD_COMM    header, pid, tid, the name (at most 15 bytes) and
//	                    a NUL padded to 8, the sample_id trailer of the
//	                    sample it comes before (CommSize).
//
// A thread's name comes before its first sample in each stream, and again
// when its name changed; records lost are told where they were lost, in
// the stream of their CPU, by a LOST record before the next record that
// fits — as perf's rings tell theirs.

// StreamSampleType is what every sample of a session stream carries: perf
// record's choice for tracepoints, less the IP and period that mean
// nothing for them — PERF_SAMPLE_IDENTIFIER (first, where any reader
// finds it), TID, TIME, CPU and RAW. (The numbers are perf_event.h's,
// spelled here rather than taken from package perfdata, which a producer
// that links this package does not need; TestStreamRecordsArePerfdatas
// checks them against it.)
const StreamSampleType = 1<<16 | 1<<1 | 1<<2 | 1<<7 | 1<<10

// The perf.data record types of a stream (perf_event.h).
const (
	recordLost   = 2
	recordComm   = 3
	recordSample = 9
)

// MaxPerfRecord is PERF_MAX_TRACE_SIZE: user_event_perf asks
// perf_trace_buf_alloc for ALIGN(record, 8) bytes, which fails above it
// (with a one-time warning, nothing counted), so the record is dropped
// before it is copied or validated. A session counts them in TooLarge,
// and tells them in its streams as records lost.
const MaxPerfRecord = 8192

// PerfTakes reports whether user_event_perf can allocate a record of n
// bytes, header included: ALIGN(n, 8) ≤ PERF_MAX_TRACE_SIZE, a payload of
// at most 8184 bytes. (A TRACE_EVENT's perf probe counts its u32 size field
// too; user_events' does not.) The daemon's sessions and a reader of a
// handed ring set (internal/handover) drop the same records.
func PerfTakes(n int) bool { return (n+7)&^7 <= MaxPerfRecord }

// MaxComms bounds the threads whose names a stream's writer (a session, a
// reader of a handed ring set) remembers having given its reader. Perf's
// readers take a name given again as the same name (a PERF_RECORD_COMM),
// so forgetting is harmless.
const MaxComms = 4096

// MaxLostNotes bounds the runs of records lost that a stream's writer
// keeps waiting to be told (a PERF_RECORD_LOST each); further ones are
// added to the last of their kind (too large or not): the counts stay
// exact, the event and time are that run's.
const MaxLostNotes = 16

// PutRawHeader writes a raw record's first 8 bytes — struct trace_entry,
// as tracing_generic_entry_update writes it for a write from user space —
// into rec: the event's type id, no irq or preempt flags, and the writing
// thread's id (common_pid).
func PutRawHeader(rec []byte, typeID int, tid int32) {
	ne := perfdataEndian
	ne.PutUint16(rec[0:], uint16(typeID))
	rec[2], rec[3] = 0, 0
	ne.PutUint32(rec[4:], uint32(tid))
}

// SampleID is the sample id of the samples of the event of type id typeID
// in a session's streams: typeID+1, never 0, which perf reads as none.
func SampleID(typeID int) uint64 { return uint64(typeID) + 1 }

// TypeID is the event type id whose samples carry sample id id: SampleID's
// inverse.
func TypeID(id uint64) int { return int(id) - 1 }

// SampleHeadSize is the bytes of a stream sample before its raw data.
const SampleHeadSize = 8 + 8 + 8 + 8 + 8 + 4

// SampleSize is the size of a stream sample whose raw record is rawLen
// bytes: the raw size word and the raw data end on 8 bytes.
func SampleSize(rawLen int) int { return SampleHeadSize + (rawLen+4+7)&^7 - 4 }

// PutSample writes a stream sample's fields into b, which is
// SampleSize(rawLen) bytes, all but the raw data — which the caller puts
// at b[SampleHeadSize:] (before or after) — and zeroes its padding.
func PutSample(b []byte, id uint64, pid, tid uint32, time uint64, cpu uint32, rawLen int) {
	ne := perfdataEndian
	n := len(b)
	ne.PutUint32(b[0:], recordSample)
	ne.PutUint16(b[4:], 0)
	ne.PutUint16(b[6:], uint16(n))
	ne.PutUint64(b[8:], id)
	ne.PutUint32(b[16:], pid)
	ne.PutUint32(b[20:], tid)
	ne.PutUint64(b[24:], time)
	ne.PutUint32(b[32:], cpu)
	ne.PutUint32(b[36:], 0)
	ne.PutUint32(b[40:], uint32(n-SampleHeadSize))
	clear(b[SampleHeadSize+rawLen : n])
}

// LostSize is the size of a stream's PERF_RECORD_LOST.
const LostSize = 8 + 8 + 8 + streamTrailerSize

// streamTrailerSize is a sample_id trailer of StreamSampleType: pid/tid,
// time, cpu/0, identifier.
const streamTrailerSize = 8 + 8 + 8 + 8

// PutLost writes a PERF_RECORD_LOST into b (LostSize bytes): n records of
// the event with sample id id were lost, the first written by tid of pid
// at time on cpu.
func PutLost(b []byte, id, n uint64, pid, tid uint32, time uint64, cpu uint32) {
	ne := perfdataEndian
	ne.PutUint32(b[0:], recordLost)
	ne.PutUint16(b[4:], 0)
	ne.PutUint16(b[6:], LostSize)
	ne.PutUint64(b[8:], id)
	ne.PutUint64(b[16:], n)
	putStreamTrailer(b[24:], id, pid, tid, time, cpu)
}

// maxComm is TASK_COMM_LEN less its NUL: the longest name a COMM record
// carries.
const maxComm = 15

// CommSize is the size of a stream's PERF_RECORD_COMM of name (cut to 15
// bytes).
func CommSize(name string) int {
	return 8 + 8 + (min(len(name), maxComm)+1+7)&^7 + streamTrailerSize
}

// PutComm writes a PERF_RECORD_COMM into b (CommSize(name) bytes): thread
// tid of process pid is named name from the sample that follows, of the
// event with sample id id, at time on cpu.
func PutComm(b []byte, pid, tid uint32, name string, id uint64, time uint64, cpu uint32) {
	ne := perfdataEndian
	if len(name) > maxComm {
		name = name[:maxComm]
	}
	n := len(b)
	ne.PutUint32(b[0:], recordComm)
	ne.PutUint16(b[4:], 0)
	ne.PutUint16(b[6:], uint16(n))
	ne.PutUint32(b[8:], pid)
	ne.PutUint32(b[12:], tid)
	end := n - streamTrailerSize
	k := copy(b[16:end], name)
	clear(b[16+k : end])
	putStreamTrailer(b[end:], id, pid, tid, time, cpu)
}

// perfdataEndian is perf.data's byte order: the machine's.
var perfdataEndian = binary.NativeEndian

// putStreamTrailer writes a sample_id trailer of StreamSampleType.
func putStreamTrailer(b []byte, id uint64, pid, tid uint32, time uint64, cpu uint32) {
	ne := perfdataEndian
	ne.PutUint32(b[0:], pid)
	ne.PutUint32(b[4:], tid)
	ne.PutUint64(b[8:], time)
	ne.PutUint32(b[16:], cpu)
	ne.PutUint32(b[20:], 0)
	ne.PutUint64(b[24:], id)
}

// A LostRun is a run of records a session's stream lost, waiting to be
// told as one PERF_RECORD_LOST (PutLost: no thread, the run's first time
// and CPU) before the stream's next record that fits: N records of the
// event with sample id ID (0: not known), the first at Time on CPU;
// TooLarge for records over perf's limit, which a session counts apart.
// The daemon's session streams and a reader of a handed ring set keep
// them alike, so that the same bytes come out.
type LostRun struct {
	ID, Time, N uint64
	CPU         int32
	TooLarge    bool
}

// AddLostRun adds the run l to runs: into the last run when it is of the
// same event and kind, else as a new run while there are fewer than
// MaxLostNotes, else into the last run of its kind — the counts stay
// exact (saturating), the event and time are that run's.
func AddLostRun(runs []LostRun, l LostRun) []LostRun {
	k := len(runs)
	switch {
	case k > 0 && runs[k-1].ID == l.ID && runs[k-1].TooLarge == l.TooLarge:
		runs[k-1].N = min(runs[k-1].N, math.MaxUint64-l.N) + l.N
		return runs
	case k >= MaxLostNotes:
		for i := k - 1; i >= 0; i-- {
			if runs[i].TooLarge == l.TooLarge {
				runs[i].N = min(runs[i].N, math.MaxUint64-l.N) + l.N
				return runs
			}
		}
	}
	return append(runs, l)
}
