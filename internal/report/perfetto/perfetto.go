// Package perfetto writes trace events as a Perfetto protobuf trace (a
// serialised perfetto.protos.Trace, the .pftrace files that Perfetto's trace
// processor and UI open): a track per process, a track per thread under it,
// named async tracks under a process, and TrackEvents on them — a
// TYPE_INSTANT per record, or TYPE_SLICE_BEGIN and TYPE_SLICE_END pairs —
// with the record's decoded fields as debug annotations.
//
// It is not a Perfetto SDK or a general protobuf library: it has no
// counters, flows or complete (X) events, it does not read traces, and it
// uses no generated code and no reflection. Messages are encoded by hand with
// google.golang.org/protobuf/encoding/protowire and constant tag bytes,
// because a report must turn millions of records a second into packets;
// [Writer.Instant], [Writer.Begin] and [Writer.End] allocate nothing once
// the strings they see have been interned and the tracks described.
//
// # Schema
//
// Field numbers and types are those of Perfetto's protos, named in the
// comments next to each constant below (protos/perfetto/trace/...). A trace
// is `repeated TracePacket packet = 1`, so the Writer streams one
// length-delimited field 1 per packet, and the output cut after any packet
// is itself a valid trace.
//
// # Timestamps
//
// Each record's time goes in TracePacket.timestamp (ns) with no
// timestamp_clock_id, so it is read in the trace's default clock domain
// (BUILTIN_CLOCK_BOOTTIME) and the trace processor converts nothing. The
// recorded times are perf's clock (ns since boot, like CLOCK_MONOTONIC),
// but naming that clock would be worse: a packet whose timestamp_clock_id
// is not the trace clock needs a ClockSnapshot linking the two domains, and
// without one the trace processor drops the packet as a clock_sync_failure
// (docs/concepts/clock-sync.md, "Operation"). Since every packet in the
// file uses the same clock, the label changes nothing for the trace on its
// own; the only cost is that merging it with a real BOOTTIME trace of the
// same machine would be off by the time spent suspended.
//
// # Interning
//
// Event names, categories and annotation names are interned on one packet
// sequence (trusted_packet_sequence_id 1): the first packet carries
// SEQ_INCREMENTAL_STATE_CLEARED, every TrackEvent carries
// SEQ_NEEDS_INCREMENTAL_STATE, and a string is defined in InternedData in
// the packet that first uses it. Names become one- or two-byte ids: an
// event with a category, a name and five arguments takes 97 bytes instead
// of about 140 with the same names spelt out in every event, and longer
// names save more. The state is never cleared again: a file has no packet
// loss to recover from.
//
// # Odd input
//
// Protobuf string fields must be valid UTF-8 and the trace processor may
// reject those that are not, so every run of invalid bytes in a name or a
// string value is replaced by U+FFFD (as [strings.ToValidUTF8] does). An
// argument with an empty name is named by its position, "arg0", "arg1", …,
// because the trace processor keys arguments by name ("debug.<name>") and
// empty keys would collide. Any int32 pid and tid are accepted, negative
// ones included. An argument of an unknown [ArgKind] is an error and writes
// nothing; the Writer never panics on input.
//
// # Tracks
//
// Track uuids are 1, 2, 3, … in the order processes and threads are first
// seen and async tracks made, so they are small varints; they are unique within the file but
// would clash if the file were concatenated with another Perfetto trace
// that uses small uuids. A thread is identified by (pid, tid): the same tid
// under two pids is two tracks.
//
// # Slices
//
// A slice is a [Writer.Begin] and a later [Writer.End] on the same track.
// Perfetto's trace processor keeps a stack of open slices per track: a
// TYPE_SLICE_END without a name closes the innermost open slice, and its
// debug annotations are added to that slice's arguments
// (src/trace_processor/importers/common/slice_tracker.{h,cc}: End,
// CompleteSliceBegin, MatchingIncompleteSliceIndex). So slices on one
// track must nest; slices that overlap without nesting go on tracks of
// their own ([Writer.AsyncTrack]). An end on a track with nothing open
// would be silently ignored by the trace processor; the Writer refuses it
// instead ([ErrNoOpenSlice]) and writes nothing, so that its caller can
// show the event some other way. A slice never ended stays open: the trace
// processor leaves its dur at -1 and the UI draws it to the end of the
// trace as "Did not end" ([Writer.OpenSlices] counts them).
//
// Async tracks are TrackDescriptors with a name and the process's track as
// parent, and neither a process nor a thread: the UI shows them in the
// process's group. Sibling tracks with the same name are merged into one
// UI track by default (TrackDescriptor.sibling_merge_behavior, default
// SIBLING_MERGE_BEHAVIOR_BY_TRACK_NAME), whose slices the UI lays out in
// rows so that overlapping ones do not cover each other.
//
// A Writer is not safe for concurrent use.
package perfetto

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers, from Perfetto's protos (checked against google/perfetto
// at ec5d16b, August 2026; the numbers are wire format and never change).
const (
	// protos/perfetto/trace/trace.proto: message Trace.
	fieldTracePacket = 1 // repeated TracePacket packet = 1;

	// protos/perfetto/trace/trace_packet.proto: message TracePacket.
	fieldPacketTimestamp       = 8  // optional uint64 timestamp = 8;
	fieldPacketSequenceID      = 10 // uint32 trusted_packet_sequence_id = 10; (oneof)
	fieldPacketTrackEvent      = 11 // TrackEvent track_event = 11; (oneof data)
	fieldPacketInternedData    = 12 // optional InternedData interned_data = 12;
	fieldPacketSequenceFlags   = 13 // optional uint32 sequence_flags = 13;
	fieldPacketTrackDescriptor = 60 // TrackDescriptor track_descriptor = 60; (oneof data)

	// TracePacket.SequenceFlags.
	seqIncrementalStateCleared = 1 // SEQ_INCREMENTAL_STATE_CLEARED = 1;
	seqNeedsIncrementalState   = 2 // SEQ_NEEDS_INCREMENTAL_STATE = 2;

	// protos/perfetto/trace/track_event/track_descriptor.proto: message TrackDescriptor.
	fieldTrackUUID       = 1 // optional uint64 uuid = 1;
	fieldTrackName       = 2 // string name = 2; (oneof static_or_dynamic_name)
	fieldTrackProcess    = 3 // optional ProcessDescriptor process = 3;
	fieldTrackThread     = 4 // optional ThreadDescriptor thread = 4;
	fieldTrackParentUUID = 5 // optional uint64 parent_uuid = 5;

	// protos/perfetto/trace/track_event/process_descriptor.proto: message ProcessDescriptor.
	fieldProcessPID  = 1 // optional int32 pid = 1;
	fieldProcessName = 6 // optional string process_name = 6;

	// protos/perfetto/trace/track_event/thread_descriptor.proto: message ThreadDescriptor.
	fieldThreadPID  = 1 // optional int32 pid = 1;
	fieldThreadTID  = 2 // optional int32 tid = 2;
	fieldThreadName = 5 // optional string thread_name = 5;

	// protos/perfetto/trace/track_event/track_event.proto: message TrackEvent.
	fieldEventCategoryIID = 3  // repeated uint64 category_iids = 3; (proto2: not packed)
	fieldEventAnnotation  = 4  // repeated DebugAnnotation debug_annotations = 4;
	fieldEventType        = 9  // optional Type type = 9;
	fieldEventNameIID     = 10 // uint64 name_iid = 10; (oneof name_field)
	fieldEventTrackUUID   = 11 // optional uint64 track_uuid = 11;
	eventTypeSliceBegin   = 1  // TrackEvent.Type TYPE_SLICE_BEGIN = 1;
	eventTypeSliceEnd     = 2  // TrackEvent.Type TYPE_SLICE_END = 2;
	eventTypeInstant      = 3  // TrackEvent.Type TYPE_INSTANT = 3;

	// protos/perfetto/trace/track_event/debug_annotation.proto: message DebugAnnotation.
	fieldAnnNameIID = 1 // uint64 name_iid = 1; (oneof name_field)
	fieldAnnBool    = 2 // bool bool_value = 2; (oneof value)
	fieldAnnUint    = 3 // uint64 uint_value = 3;
	fieldAnnInt     = 4 // int64 int_value = 4;
	fieldAnnString  = 6 // string string_value = 6;

	// protos/perfetto/trace/interned_data/interned_data.proto: message InternedData.
	fieldInternedCategory = 1 // repeated EventCategory event_categories = 1;
	fieldInternedName     = 2 // repeated EventName event_names = 2;
	fieldInternedAnnName  = 3 // repeated DebugAnnotationName debug_annotation_names = 3;

	// EventCategory, EventName (track_event.proto) and DebugAnnotationName
	// (debug_annotation.proto) share the same shape.
	fieldInternIID  = 1 // optional uint64 iid = 1;
	fieldInternName = 2 // optional string name = 2;
)

// sequenceID is the one packet sequence the Writer uses. 0 is invalid
// (trace_packet.proto: "A value of zero denotes an invalid ID").
const sequenceID = 1

// The wire types of the tags below (protowire.VarintType, BytesType).
const (
	wireVarint = 0
	wireBytes  = 2
)

// Tags (field number << 3 | wire type) of the fields written on the hot
// path, as constant bytes: every one of these field numbers is below 16, so
// each tag is a one-byte varint, and a constant byte costs less than
// protowire.AppendTag. TestTags checks them against protowire.
const (
	tagPacket        = fieldTracePacket<<3 | wireBytes
	tagTimestamp     = fieldPacketTimestamp<<3 | wireVarint
	tagSequenceID    = fieldPacketSequenceID<<3 | wireVarint
	tagSequenceFlags = fieldPacketSequenceFlags<<3 | wireVarint
	tagInternedData  = fieldPacketInternedData<<3 | wireBytes
	tagTrackEvent    = fieldPacketTrackEvent<<3 | wireBytes
	tagEventTrack    = fieldEventTrackUUID<<3 | wireVarint
	tagEventType     = fieldEventType<<3 | wireVarint
	tagEventCategory = fieldEventCategoryIID<<3 | wireVarint
	tagEventName     = fieldEventNameIID<<3 | wireVarint
	tagAnnotation    = fieldEventAnnotation<<3 | wireBytes
	tagAnnName       = fieldAnnNameIID<<3 | wireVarint
	tagAnnBool       = fieldAnnBool<<3 | wireVarint
	tagAnnUint       = fieldAnnUint<<3 | wireVarint
	tagAnnInt        = fieldAnnInt<<3 | wireVarint
	tagAnnString     = fieldAnnString<<3 | wireBytes
)

// ArgKind says which field of an [Arg] holds its value.
type ArgKind uint8

// The kinds of argument. The zero ArgKind is not one of them, so that an
// Arg nobody filled in is an error rather than a silent zero.
const (
	ArgInt    ArgKind = iota + 1 // Int, as DebugAnnotation.int_value
	ArgUint                      // Uint, as uint_value
	ArgString                    // Str, as string_value
	ArgBytes                     // Bytes, as string_value in lower-case hex
	ArgBool                      // Bool, as bool_value
)

// ErrArgKind is wrapped by the error for an argument of an unknown kind.
var ErrArgKind = errors.New("unknown argument kind")

// ErrNoOpenSlice is wrapped by the error of an End on a track that has no
// open slice: the trace processor would drop it, so the Writer writes
// nothing.
var ErrNoOpenSlice = errors.New("no open slice on the track")

// ErrTrack is wrapped by the error of a Begin or End on a track the Writer
// did not make, or on a process track.
var ErrTrack = errors.New("not a thread or async track of this Writer")

// A Track is a track of a Writer's trace, for its slices: a thread's
// ([Writer.ThreadTrack]) or an async track ([Writer.AsyncTrack]). Its value
// is the track's uuid.
type Track uint64

// An Arg is one decoded field of a record, written as a debug annotation.
// Only the field that Kind names is read.
type Arg struct {
	Name  string
	Kind  ArgKind
	Bool  bool
	Int   int64
	Uint  uint64
	Str   string
	Bytes []byte
}

// Int returns an ArgInt argument.
func Int(name string, v int64) Arg { return Arg{Name: name, Kind: ArgInt, Int: v} }

// Uint returns an ArgUint argument.
func Uint(name string, v uint64) Arg { return Arg{Name: name, Kind: ArgUint, Uint: v} }

// String returns an ArgString argument.
func String(name, v string) Arg { return Arg{Name: name, Kind: ArgString, Str: v} }

// Bytes returns an ArgBytes argument.
func Bytes(name string, v []byte) Arg { return Arg{Name: name, Kind: ArgBytes, Bytes: v} }

// Bool returns an ArgBool argument.
func Bool(name string, v bool) Arg { return Arg{Name: name, Kind: ArgBool, Bool: v} }

// A Writer writes one Perfetto trace to an io.Writer.
type Writer struct {
	out io.Writer
	buf []byte // packets not yet written to out
	err error  // sticky: the first write error

	started bool   // a packet has been written (the first clears incremental state)
	haveTS  bool   // lastTS is set
	lastTS  uint64 // timestamp of the latest event, given to descriptors
	uuids   uint64 // last track uuid handed out

	procs   map[int32]*track
	threads map[uint64]*track // key: threadKey(pid, tid)
	tracks  []*track          // by uuid-1
	open    int               // slices begun and not ended, on all tracks
	// The last thread looked up: records come in runs from one thread.
	lastKey    uint64
	lastThread *track

	cats, names, annNames interner
	argNames              []string // "arg0", "arg1", …, made on first use

	// Scratch, reused for every packet.
	interned []byte    // InternedData body of the current packet
	anns     []annInfo // the current event's annotations, sized
	desc     []byte    // descriptor packets
}

type track struct {
	uuid  uint64
	name  string
	kind  trackKind
	depth int // open slices
}

type trackKind uint8

const (
	processTrack trackKind = iota
	threadTrack
	asyncTrack
)

// newTrack hands out the next uuid.
func (w *Writer) newTrack(kind trackKind) *track {
	w.uuids++
	t := &track{uuid: w.uuids, kind: kind}
	w.tracks = append(w.tracks, t)
	return t
}

// annInfo is what Instant works out about an argument while sizing the
// packet, to encode it afterwards without working it out again.
type annInfo struct {
	iid   uint64 // interned name
	val   uint64 // varint value
	n     int    // string value length, after UTF-8 repair
	size  int    // DebugAnnotation size
	tag   byte   // value tag
	valid bool   // the string value is valid UTF-8 as it is
}

// NewWriter returns a Writer that writes a trace to w. Call Flush when done.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		out:      w,
		buf:      make([]byte, 0, bufSize),
		procs:    make(map[int32]*track),
		threads:  make(map[uint64]*track),
		cats:     newInterner(),
		names:    newInterner(),
		annNames: newInterner(),
	}
}

// Flush writes any buffered data to the underlying io.Writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.flush()
}

// bufSize is the size of the Writer's buffer, and so of its writes.
const bufSize = 64 << 10

// flush writes the buffer to out.
func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.out.Write(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("perfetto: %w", err)
		return w.err
	}
	if cap(w.buf) > bufSize {
		w.buf = make([]byte, 0, bufSize) // do not keep a huge packet's buffer
	}
	w.buf = w.buf[:0]
	return nil
}

// reserve makes room for n more bytes in the buffer, so that appending
// them does not reallocate.
func (w *Writer) reserve(n int) error {
	if len(w.buf)+n <= cap(w.buf) {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	if n > cap(w.buf) {
		w.buf = make([]byte, 0, n)
	}
	return nil
}

// Process describes process pid with a process track (a TrackDescriptor
// with a ProcessDescriptor). Describing a process again with a new
// non-empty name renames it; an empty or unchanged name does nothing.
func (w *Writer) Process(pid int32, name string) error {
	if w.err != nil {
		return w.err
	}
	_, err := w.process(pid, name)
	return err
}

// Thread describes thread tid of process pid with a thread track (a
// TrackDescriptor with a ThreadDescriptor) whose parent is the process's
// track, describing the process first if need be. Renaming works as for
// Process.
func (w *Writer) Thread(pid, tid int32, name string) error {
	if w.err != nil {
		return w.err
	}
	_, err := w.thread(pid, tid, name)
	return err
}

// Instant writes one TYPE_INSTANT TrackEvent at ts (ns, see the package
// doc) on the track of thread (pid, tid), with args as debug annotations in
// their order. It describes the process and thread first, unnamed, if they
// have not been. An empty category writes no category.
//
// The Writer copies the names it must keep, but it also remembers the last
// strings it was given, to recognise them again by their pointers; so, as
// Go requires of every string, their bytes must not change afterwards (a
// string made with unsafe.String over a reused buffer would break this).
//
// The packet is sized first and then encoded once, straight into the
// output buffer: nested messages need their lengths before their bodies,
// and encoding bodies into scratch buffers to copy them after their
// lengths cost more than the sizing.
func (w *Writer) Instant(ts uint64, pid, tid int32, category, name string, args []Arg) error {
	if w.err != nil {
		return w.err
	}
	if err := checkArgs(name, args); err != nil {
		return err
	}
	// Set before describing the thread: its descriptors carry the time.
	w.lastTS, w.haveTS = ts, true
	key := threadKey(pid, tid)
	t := w.lastThread
	if t == nil || w.lastKey != key {
		var err error
		if t, err = w.thread(pid, tid, ""); err != nil {
			return err
		}
		w.lastKey, w.lastThread = key, t
	}
	return w.event(ts, t, eventTypeInstant, category, name, true, args)
}

// checkArgs checks the kinds of args. It is called before interning
// anything: an interned id handed out for a packet that is then not
// written would be used later undefined.
func checkArgs(name string, args []Arg) error {
	for i := range args {
		if k := args[i].Kind; k < ArgInt || k > ArgBool {
			return fmt.Errorf("perfetto: event %q: argument %d (%q): %w %d", name, i, args[i].Name, ErrArgKind, k)
		}
	}
	return nil
}

// ThreadTrack returns the track of thread (pid, tid), for its slices,
// describing the process and thread first, unnamed, if they have not been.
// Its instants ([Writer.Instant]) go on the same track.
func (w *Writer) ThreadTrack(pid, tid int32) (Track, error) {
	if w.err != nil {
		return 0, w.err
	}
	t, err := w.thread(pid, tid, "")
	if err != nil {
		return 0, err
	}
	return Track(t.uuid), nil
}

// AsyncTrack makes a new track named name in process pid's group
// (describing the process first, unnamed, if it has not been), for slices
// that need not nest with those of any other track. Each call makes a new
// track; tracks of the same name are shown merged (see the package doc).
func (w *Writer) AsyncTrack(pid int32, name string) (Track, error) {
	if w.err != nil {
		return 0, w.err
	}
	p, err := w.process(pid, "")
	if err != nil {
		return 0, err
	}
	t := w.newTrack(asyncTrack)
	t.name = strings.Clone(name)
	var td []byte
	td = appendVarintField(td, fieldTrackUUID, t.uuid)
	td = appendVarintField(td, fieldTrackParentUUID, p.uuid)
	td = appendStringField(td, fieldTrackName, name)
	return Track(t.uuid), w.writeDescriptor(td)
}

// trackOf returns the thread or async track tr.
func (w *Writer) trackOf(tr Track) (*track, error) {
	if tr == 0 || uint64(tr) > uint64(len(w.tracks)) || w.tracks[tr-1].kind == processTrack {
		return nil, fmt.Errorf("perfetto: track %d: %w", tr, ErrTrack)
	}
	return w.tracks[tr-1], nil
}

// Begin writes a TYPE_SLICE_BEGIN TrackEvent at ts on track tr: it opens a
// slice named name, with args as its debug annotations, inside the slice
// open on tr, if any. The strings are kept as for Instant.
func (w *Writer) Begin(ts uint64, tr Track, category, name string, args []Arg) error {
	if w.err != nil {
		return w.err
	}
	t, err := w.trackOf(tr)
	if err != nil {
		return err
	}
	if err := checkArgs(name, args); err != nil {
		return err
	}
	if err := w.event(ts, t, eventTypeSliceBegin, category, name, true, args); err != nil {
		return err
	}
	t.depth++
	w.open++
	return nil
}

// End writes a TYPE_SLICE_END TrackEvent at ts on track tr: it closes the
// innermost slice open on tr, adding args to that slice's arguments. It
// has no name or category: the trace processor matches an end that has
// them by them, and closing the innermost slice is what a caller that
// keeps its slices nested means. An End on a track with no open slice
// writes nothing and returns an error wrapping [ErrNoOpenSlice].
func (w *Writer) End(ts uint64, tr Track, args []Arg) error {
	if w.err != nil {
		return w.err
	}
	t, err := w.trackOf(tr)
	if err != nil {
		return err
	}
	if t.depth == 0 {
		return fmt.Errorf("perfetto: end on track %d (%q): %w", tr, t.name, ErrNoOpenSlice)
	}
	if err := checkArgs("", args); err != nil {
		return err
	}
	if err := w.event(ts, t, eventTypeSliceEnd, "", "", false, args); err != nil {
		return err
	}
	t.depth--
	w.open--
	return nil
}

// OpenSlices returns how many slices have begun and not ended, on all
// tracks.
func (w *Writer) OpenSlices() int { return w.open }

// event writes one TrackEvent of type typ at ts on track t, named name
// unless !named, its args checked.
func (w *Writer) event(ts uint64, t *track, typ byte, category, name string, named bool, args []Arg) error {
	w.lastTS, w.haveTS = ts, true

	// Intern, and size the TrackEvent.
	in := w.interned[:0]
	evSize := 1 + sizeVarint(t.uuid) + 2 // track_uuid, type
	var catIID uint64
	if category != "" {
		var isNew bool
		if catIID, isNew = w.cats.id(category); isNew {
			in = appendInterned(in, fieldInternedCategory, catIID, category)
		}
		evSize += 1 + sizeVarint(catIID)
	}
	var nameIID uint64
	var isNew bool
	if named {
		if nameIID, isNew = w.names.id(name); isNew {
			in = appendInterned(in, fieldInternedName, nameIID, name)
		}
		evSize += 1 + sizeVarint(nameIID)
	}
	if cap(w.anns) < len(args) {
		w.anns = make([]annInfo, len(args))
	}
	anns := w.anns[:len(args)]
	for i := range args {
		a := &args[i]
		an := a.Name
		if an == "" {
			an = w.argName(i)
		}
		ai := &anns[i]
		*ai = annInfo{tag: tagAnnString}
		if ai.iid, isNew = w.annNames.id(an); isNew {
			in = appendInterned(in, fieldInternedAnnName, ai.iid, an)
		}
		switch a.Kind {
		case ArgInt:
			ai.tag, ai.val = tagAnnInt, uint64(a.Int)
		case ArgUint:
			ai.tag, ai.val = tagAnnUint, a.Uint
		case ArgBool:
			ai.tag = tagAnnBool
			if a.Bool {
				ai.val = 1
			}
		case ArgString:
			if ai.valid = utf8.ValidString(a.Str); ai.valid {
				ai.n = len(a.Str)
			} else {
				ai.n = validLen(a.Str)
			}
		case ArgBytes:
			ai.n = 2 * len(a.Bytes)
		}
		ai.size = 1 + sizeVarint(ai.iid) + 1
		if ai.tag == tagAnnString {
			ai.size += sizeVarint(uint64(ai.n)) + ai.n
		} else {
			ai.size += sizeVarint(ai.val)
		}
		evSize += 1 + sizeVarint(uint64(ai.size)) + ai.size
	}
	w.interned = in

	// Size the TracePacket and the Trace.packet field around it.
	pktSize := 1 + sizeVarint(ts) + 2 + 2 + 1 + sizeVarint(uint64(evSize)) + evSize
	if len(in) > 0 {
		pktSize += 1 + sizeVarint(uint64(len(in))) + len(in)
	}
	total := 1 + sizeVarint(uint64(pktSize)) + pktSize

	if err := w.reserve(total); err != nil {
		return err
	}
	// Encode straight into the buffer, which has room: no copy, and no
	// append below reallocates.
	start := len(w.buf)
	b := w.buf
	flags := byte(seqNeedsIncrementalState)
	if !w.started {
		flags |= seqIncrementalStateCleared
	}
	b = append(b, tagPacket)
	b = appendVarint(b, uint64(pktSize))
	b = append(b, tagTimestamp)
	b = appendVarint(b, ts)
	b = append(b, tagSequenceID, sequenceID, tagSequenceFlags, flags)
	if len(in) > 0 {
		b = append(b, tagInternedData)
		b = appendVarint(b, uint64(len(in)))
		b = append(b, in...)
	}
	b = append(b, tagTrackEvent)
	b = appendVarint(b, uint64(evSize))
	b = append(b, tagEventTrack)
	b = appendVarint(b, t.uuid)
	b = append(b, tagEventType, typ)
	if catIID != 0 {
		b = append(b, tagEventCategory)
		b = appendVarint(b, catIID)
	}
	if named {
		b = append(b, tagEventName)
		b = appendVarint(b, nameIID)
	}
	for i := range anns {
		ai := &anns[i]
		b = append(b, tagAnnotation)
		b = appendVarint(b, uint64(ai.size))
		b = append(b, tagAnnName)
		b = appendVarint(b, ai.iid)
		b = append(b, ai.tag)
		if ai.tag != tagAnnString {
			b = appendVarint(b, ai.val)
			continue
		}
		b = appendVarint(b, uint64(ai.n))
		switch a := &args[i]; {
		case a.Kind == ArgBytes:
			b = hex.AppendEncode(b, a.Bytes)
		case ai.valid:
			b = append(b, a.Str...)
		default:
			b = appendValid(b, a.Str)
		}
	}
	if len(b)-start != total {
		// A sizing bug: write nothing rather than a corrupt trace.
		w.err = fmt.Errorf("perfetto: internal error: event %q encoded in %d bytes, sized %d", name, len(b)-start, total)
		w.buf = w.buf[:start]
		return w.err
	}
	w.buf = b
	w.started = true
	return nil
}

// process returns pid's track, writing its descriptor if it is new or
// renamed.
func (w *Writer) process(pid int32, name string) (*track, error) {
	p := w.procs[pid]
	if p != nil && (name == "" || name == p.name) {
		return p, nil
	}
	if p == nil {
		p = w.newTrack(processTrack)
		w.procs[pid] = p
	}
	p.name = strings.Clone(name)

	var d [32]byte
	pd := appendVarintField(d[:0], fieldProcessPID, uint64(int64(pid))) // int32: sign-extended
	var td []byte
	td = appendVarintField(td, fieldTrackUUID, p.uuid)
	td = protowire.AppendTag(td, fieldTrackProcess, protowire.BytesType)
	td = protowire.AppendVarint(td, uint64(len(pd)+sizeString(fieldProcessName, name)))
	td = append(td, pd...)
	if name != "" {
		td = appendStringField(td, fieldProcessName, name)
	}
	return p, w.writeDescriptor(td)
}

// thread returns the track of (pid, tid), writing the process's and the
// thread's descriptors if they are new or renamed.
func (w *Writer) thread(pid, tid int32, name string) (*track, error) {
	key := threadKey(pid, tid)
	t := w.threads[key]
	if t != nil && (name == "" || name == t.name) {
		return t, nil
	}
	p, err := w.process(pid, "")
	if err != nil {
		return nil, err
	}
	if t == nil {
		t = w.newTrack(threadTrack)
		w.threads[key] = t
	}
	t.name = strings.Clone(name)

	var d [32]byte
	thd := appendVarintField(d[:0], fieldThreadPID, uint64(int64(pid)))
	thd = appendVarintField(thd, fieldThreadTID, uint64(int64(tid)))
	var td []byte
	td = appendVarintField(td, fieldTrackUUID, t.uuid)
	td = appendVarintField(td, fieldTrackParentUUID, p.uuid)
	td = protowire.AppendTag(td, fieldTrackThread, protowire.BytesType)
	td = protowire.AppendVarint(td, uint64(len(thd)+sizeString(fieldThreadName, name)))
	td = append(td, thd...)
	if name != "" {
		td = appendStringField(td, fieldThreadName, name)
	}
	return t, w.writeDescriptor(td)
}

// writeDescriptor writes a packet holding TrackDescriptor td. It carries
// the latest event's time, if any, so that the trace processor sorts a
// rename into place (docs/reference/synthetic-track-event.md recommends a
// timestamp on process descriptors).
func (w *Writer) writeDescriptor(td []byte) error {
	var p [32]byte
	h := p[:0]
	if w.haveTS {
		h = appendVarintField(h, fieldPacketTimestamp, w.lastTS)
	}
	h = appendVarintField(h, fieldPacketSequenceID, sequenceID)
	if !w.started {
		h = appendVarintField(h, fieldPacketSequenceFlags, seqIncrementalStateCleared)
	}
	h = protowire.AppendTag(h, fieldPacketTrackDescriptor, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(td)))
	b := append(w.desc[:0], tagPacket)
	b = protowire.AppendVarint(b, uint64(len(h)+len(td)))
	b = append(b, h...)
	b = append(b, td...)
	w.desc = b
	if err := w.reserve(len(b)); err != nil {
		return err
	}
	w.buf = append(w.buf, b...)
	w.started = true
	return nil
}

// argName returns "arg<i>", made once per i.
func (w *Writer) argName(i int) string {
	for len(w.argNames) <= i {
		w.argNames = append(w.argNames, "arg"+strconv.Itoa(len(w.argNames)))
	}
	return w.argNames[i]
}

func threadKey(pid, tid int32) uint64 { return uint64(uint32(pid))<<32 | uint64(uint32(tid)) }

// appendVarint is protowire.AppendVarint with the one-byte case, most of
// a trace's varints (tags' values, ids, small numbers), inlined.
func appendVarint(b []byte, v uint64) []byte {
	if v < 1<<7 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// sizeVarint is protowire.SizeVarint with the one-byte case first.
func sizeVarint(v uint64) int {
	if v < 1<<7 {
		return 1
	}
	return protowire.SizeVarint(v)
}

// appendInterned appends one interned entry (EventCategory, EventName or
// DebugAnnotationName: iid = 1, name = 2) as field f of InternedData.
func appendInterned(b []byte, f protowire.Number, iid uint64, s string) []byte {
	// Unlike in descriptors, an empty name is written: it is a value.
	size := 1 + sizeVarint(iid) + 1 + protowire.SizeBytes(validLen(s))
	b = protowire.AppendTag(b, f, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendVarintField(b, fieldInternIID, iid)
	return appendStringField(b, fieldInternName, s)
}

func appendVarintField(b []byte, f protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, f, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendStringField appends a string field, made valid UTF-8.
func appendStringField(b []byte, f protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(validLen(s)))
	return appendValid(b, s)
}

// sizeString is the size of appendStringField(nil, f, s), or 0 for an
// empty s, which the descriptors leave out.
func sizeString(f protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	n := validLen(s)
	return protowire.SizeTag(f) + protowire.SizeBytes(n)
}

// validLen returns the length of s once each run of invalid UTF-8 is
// replaced by U+FFFD, as strings.ToValidUTF8(s, "\uFFFD") would.
func validLen(s string) int {
	if utf8.ValidString(s) {
		return len(s)
	}
	n := 0
	inRun := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if !inRun {
				n += utf8.RuneLen(utf8.RuneError)
				inRun = true
			}
		} else {
			n += size
			inRun = false
		}
		i += size
	}
	return n
}

// appendValid appends s with each run of invalid UTF-8 replaced by U+FFFD,
// without allocating.
func appendValid(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(b, s...)
	}
	inRun := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if !inRun {
				b = utf8.AppendRune(b, utf8.RuneError)
				inRun = true
			}
		} else {
			b = append(b, s[i:i+size]...)
			inRun = false
		}
		i += size
	}
	return b
}

// An interner gives strings interning ids 1, 2, 3, … (0 means unset in
// Perfetto's interning). A small direct-mapped cache in front of the map
// makes the usual lookup, a string seen in the previous events, a hash of
// three bytes and one compare instead of a map lookup, which matters with
// seven lookups per event.
type interner struct {
	ids   map[string]uint64 // keys are copies
	cache [256]internEntry
}

// internEntry holds the caller's own string, not the map's copy: callers
// pass the same strings again and again (a format's field names), and
// comparing a string with itself stops at the pointers, while comparing it
// with a copy compares the bytes.
type internEntry struct {
	s  string
	id uint64
}

func newInterner() interner { return interner{ids: make(map[string]uint64)} }

// id returns s's id and whether s was new (and so must be defined in the
// packet that uses it).
func (t *interner) id(s string) (uint64, bool) {
	e := &t.cache[cacheSlot(s)]
	if e.id != 0 && e.s == s {
		return e.id, false
	}
	id, ok := t.ids[s]
	if !ok {
		// Copy: the map keeps its keys forever, and they should not pin
		// whatever larger buffer the caller's string may point into.
		id = uint64(len(t.ids) + 1)
		t.ids[strings.Clone(s)] = id
	}
	*e = internEntry{s, id}
	return id, !ok
}

func cacheSlot(s string) uint8 {
	if len(s) == 0 {
		return 0
	}
	h := uint(len(s))
	h = h*31 + uint(s[0])
	h = h*31 + uint(s[len(s)/2])
	h = h*31 + uint(s[len(s)-1])
	return uint8(h ^ h>>8)
}
