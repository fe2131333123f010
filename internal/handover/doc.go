// Package handover is the hand-over of a producer's ring set from the
// daemon to a session's reader (issue 31): the reader's side — a handed
// set read in place, each record checked and laid out as the daemon would
// have — and the control memfd the two sides share, whose ownership words
// hand each ring over and take it back.
//
// # Why
//
// Every record a producer publishes into its ring set is otherwise read by
// the daemon's drainer of its ring index, checked, and laid out as a perf
// sample in the session's stream of that index, which `uetrace record`
// reads: about 150 ns of the daemon's CPU a record, one goroutine per ring
// index for every producer of the machine. When one session is the only
// consumer of every event a producer connection registered — no trace
// buffer, no other session, no filter (subsys.File.HandTo) — the daemon
// hands that connection's set to the session's reader instead, which maps
// the producer's memfd and does the drainer's work on its own CPUs: the
// daemon touches no record of the set. When that stops being true (an
// enable, another session, a filter, a registration on the connection,
// the session or the connection closing) the daemon takes the set back,
// without waiting for the reader past a bound, and its drainers go on
// exactly where the reader stopped: every record delivered once.
//
// # Ownership words
//
// The control memfd (CreateControl, AttachControl) holds, per ring k, a
// word own = tail | state — Daemon, Owned (the reader may read from tail)
// or Reading (the reader is in a pass from tail) — and the reader's counts
// (Counts), with its counts of each write index's records written and
// dropped (EventCounts, which the daemon adds to the events' counts: a
// set has at most MaxCountedEvents write indices). A pass of the reader (Set.Pass) is: Begin (Owned → Reading by
// compare-and-swap: failing, the daemon took the ring back, and the
// reader drops it); read and check records from tail, laying them out into
// an output it has not committed; Commit (Reading at tail → Owned at the
// new tail, by compare-and-swap). Success: the output is the reader's, its
// counts are stored, and only now is the new tail published in the ring's
// header (shmring.Consumer.DeferPublish) — the producer may reuse that
// space only once no one else can have to read it. Failure: the daemon
// forced the ring back during the pass; the output is discarded, the
// tail not published, the counts not stored, the ring dropped. (The
// counts are stored after the commit, where the design had them before:
// stored before, a failed pass's counts would have to be put back, and
// that store could land after the daemon gave the ring again.)
//
// The daemon takes ring k back (Control.TakeBack) with one
// compare-and-swap, Owned → Daemon, its drainer resuming at the tail
// (shmring.Consumer.Resume). A reader in a pass (a few microseconds) is
// waited for, at most a bound — spinning, yielding, then napping — then
// the ring is forced back, Reading → Daemon: the reader's commit fails
// and it discards its pass, so even a stopped or dead reader cannot make
// a record delivered twice into the session, or lost. Between the two,
// exactly one side owns every record: the drainer the records before a
// tail it took back, the reader those before a tail it committed.
//
// # Trust
//
// The reader is a tracer (perfmon-capable, or named by --tracers): it
// could read every record already. It maps the producer's ring header
// writable, as the daemon's consumer does, to publish its tail and say it
// sleeps; what it writes there can cost that producer only its own
// records, as a producer treats a tail it does not believe today. Every
// word of the control memfd is hostile input to the daemon: a tail
// outside what the ring could hold is caught by the drainer's consumer,
// which validates every position; a state it never writes is taken as
// Reading and forced back after the bound; the counts are claims, only
// ever added, saturating. The ring's records are hostile input to the
// reader as they are to the daemon: the reader reads them with
// shmring.Consumer's checks, copies each payload once and validates the
// copy, never the ring.
//
// # The reader's work is the drainer's
//
// The output of ring k, a Stream, is byte for byte what the daemon's
// drainer and the session's stream k would have written for the same
// records (internal/daemon's ring.go and merge.go, subsys's write.go and
// session_stream.go): the same checks in the same order, sharing their
// rules — ringcheck's thread id, CPU, loss record and loss budget,
// wire's PERF_MAX_TRACE_SIZE, record layouts, name and lost-run bounds,
// eventdef's size check and validation — and the same records:
// PERF_RECORD_SAMPLE, PERF_RECORD_LOST before the next sample where
// records were lost (loss records, records too large for perf), and
// PERF_RECORD_COMM before a thread's first sample in the stream.
//
// Where it differs:
//
//   - no merge across sets: a Stream has each set's records in ring order,
//     pass after pass, where the drainer merges ring k of every producer
//     by time. Perf's readers sort by time within rounds, as they do for
//     the kernel's per-CPU rings;
//   - everything ring k holds goes to the Stream of k, where the drainer
//     puts a record in the stream of its CPU field (cpu mod R). The two
//     agree for every record a producer wrote on the CPU of its ring; a
//     thread that migrated between reading its CPU and reserving, or a
//     producer that lies, has that record in stream k, its CPU field
//     unchanged;
//   - a Stream never runs out of room: where a session's stream would drop
//     a record it cannot hold (counted lost), the reader's output grows
//     until its caller writes it out;
//   - a loss record's count is counted (Counts.Lost, LostRecords,
//     Rejected) when it is read, not when it is told: a pass's counts are
//     then whole when it commits. Loss records waiting for the ring's next
//     record when the ring is taken back are told by the reader, on their
//     own CPUs, since the drainer resumes after them;
//   - the names a Stream gave its reader are forgotten, not rolled back,
//     when a pass is discarded: a name given again is harmless;
//   - the event's own written and dropped counts (user_events_status)
//     are the daemon's, which the reader cannot reach.
//
// It is not the daemon's side of the hand-over (which set, when, the wire
// message: internal/daemon, subsys.File.HandTo) nor the recording that
// writes the Streams into a file (internal/record).
package handover
