// Package userevents lets a Go program create Linux user_events and write
// them: trace events that ftrace, perf, eBPF — or uetrace — see beside the
// kernel's own.
//
//	f, err := userevents.Open(nil) // the kernel, else the daemon
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer f.Close()
//	request, err := userevents.Define2[uint32, string](f, "myapp_request u32 status; __rel_loc char[] path")
//	if err != nil {
//		log.Fatal(err)
//	}
//
//	// A request a second until stopped: nothing is built while nobody
//	// traces, nothing is allocated when someone does.
//	for range time.Tick(time.Second) {
//		if err := request.Write(200, "/index.html"); err != nil {
//			log.Print(err)
//		}
//	}
//
// Define1 … Define6 register an event whose fields are set from Go values
// of the types given, in order, and check when they register that each
// type fits its field (see Value). For events whose fields are known only
// at run time, File.Register returns an Event, Event.Encode builds a
// payload with an eventdef.Encoder, and Event.Write writes raw bytes.
//
// Open finds user_events_data: on a kernel built with CONFIG_USER_EVENTS it
// speaks the kernel ABI directly (DIAG_IOCSREG, DIAG_IOCSUNREG,
// DIAG_IOCSDEL, writev of [write_index][payload]); on one without — most
// distribution kernels — it talks to a uetrace daemon (`uetrace serve`)
// over a Unix socket, with the same calls and the same errno. Each backend
// is a DataFile — the kernel's (kernel.go), the daemon's (daemon.go) — and
// Options.OpenData takes any other: package usereventstest's in-process
// kernel, for tests and demos.
//
// It is the producer's side only, and links nothing else: package tracefs
// reads and writes the file tree (user_events_status, dynamic_events,
// events/.../enable, trace) of the same backends; `uetrace serve` is the
// daemon, and `uetrace record` and `uetrace report` read what was traced.
//
// # Enable words
//
// Enabled is one atomic load and a bit test of the event's enable word,
// which the kernel (or the daemon) sets while something is attached. The
// words are 4-byte slots of an arena outside the Go heap — anonymous memory
// for the kernel, a sealed memfd shared with the daemon — so their addresses
// never move and no page is spent per event; a slot is reused once its
// event is closed. A closed Event's word pointer is first repointed at a
// word that is never set, so a stale Event reads "disabled" rather than
// another event's bit, and Enabled needs no lock.
//
// The kernel keeps enablers per task (current->user_event_mm), shared only
// with threads cloned after the first registration; Go moves goroutines
// between threads, so this package issues every DIAG_IOCSREG and
// DIAG_IOCSUNREG from one locked OS thread. Writes come from any goroutine.
//
// # Differences between the backends
//
// The daemon backend sends only the first bytes and the length of a
// write longer than 64 KiB (the protocol's MaxWrite): Linux drops a record that long
// (ftrace holds about 4 KiB, perf 8 KiB) without reading it, and the
// daemon answers it as Linux does.
//
// The daemon backend writes through rings shared with the daemon
// (RingTransport, the default): one per CPU index the daemon drains apart
// (a ring set; a daemon before ring sets is written to over the socket).
// Write checks the payload here with the kernel's rules and returns the
// kernel's errno, then publishes the record into the ring of the CPU it
// runs on, with its time, thread and CPU (internal/stamp), without a
// system call; the daemon delivers each CPU's records in time order into
// that CPU's buffers, and its readers merge the CPUs by time, as the
// kernel's do. When a ring is full — the daemon did not keep up — the
// record is dropped, Write still succeeds, and Event.Dropped counts it, as
// a full kernel ring buffer drops; the daemon learns of it with the next
// write into that ring and its consumers count it ("LOST n EVENTS" in the
// trace, PERF_RECORD_LOST in perf.data). Each ring's size is
// Options.RingKB, else $UETRACE_RING_KB, else its share of DefaultRingKB.
// With Options.Transport set to SocketTransport, or when the daemon
// refuses a ring, each Write is sent to the daemon and waits for its
// answer instead. A command containing a NUL byte is
// EINVAL on every backend: the kernel would silently register only the part
// before it.
package userevents
