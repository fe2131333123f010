// Package perfettotest is a test helper: it checks that bytes parse as a
// perfetto.protos.Trace against Perfetto's own schema (the subset that
// package perfetto writes, built at run time with protodesc and decoded
// with dynamicpb), and decodes them into plain Go values — tracks,
// instants, and slices (begins paired with their ends), with their debug
// annotations — with interned names resolved, as Perfetto's trace
// processor would read them. Slices are paired as the trace processor's
// SliceTracker pairs them (src/trace_processor/importers/common/
// slice_tracker.cc in google/perfetto): per track, an end without a name
// closes the innermost open slice and adds its annotations to that
// slice's; a slice never ended keeps dur -1.
//
// It is used by tests only (of package perfetto and of its users, such as
// report); no program should import it. It is not a Perfetto reader: it
// knows only the messages and fields that package perfetto writes, and
// treats every other field as an error, because a field the subset does
// not declare is one the writer should not have written.
package perfettotest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schemaText is the subset of Perfetto's schema that package perfetto
// writes, with Perfetto's message names, field numbers, types, labels and
// oneofs, copied from:
//
//	protos/perfetto/trace/trace.proto                        Trace
//	protos/perfetto/trace/trace_packet.proto                 TracePacket
//	protos/perfetto/trace/track_event/track_descriptor.proto TrackDescriptor
//	protos/perfetto/trace/track_event/process_descriptor.proto ProcessDescriptor
//	protos/perfetto/trace/track_event/thread_descriptor.proto ThreadDescriptor
//	protos/perfetto/trace/track_event/track_event.proto      TrackEvent, EventCategory, EventName
//	protos/perfetto/trace/track_event/debug_annotation.proto DebugAnnotation, DebugAnnotationName
//	protos/perfetto/trace/interned_data/interned_data.proto  InternedData
//
// Only the fields the Writer sets are declared, so any other field (a wrong
// number, or a right number with the wrong wire type) decodes as unknown.
// All are proto2 like Perfetto's, so enums are closed: Parse also rejects a
// TrackEvent.type outside TrackEvent.Type.
const schemaText = `
name: "perfetto_subset.proto"
package: "perfetto.protos"
syntax: "proto2"
message_type {
  name: "Trace"
  field { name: "packet" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".perfetto.protos.TracePacket" }
}
message_type {
  name: "TracePacket"
  field { name: "timestamp" number: 8 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "track_event" number: 11 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.TrackEvent" oneof_index: 0 }
  field { name: "track_descriptor" number: 60 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.TrackDescriptor" oneof_index: 0 }
  field { name: "trusted_packet_sequence_id" number: 10 label: LABEL_OPTIONAL type: TYPE_UINT32 oneof_index: 1 }
  field { name: "interned_data" number: 12 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.InternedData" }
  field { name: "sequence_flags" number: 13 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  oneof_decl { name: "data" }
  oneof_decl { name: "optional_trusted_packet_sequence_id" }
  enum_type {
    name: "SequenceFlags"
    value { name: "SEQ_UNSPECIFIED" number: 0 }
    value { name: "SEQ_INCREMENTAL_STATE_CLEARED" number: 1 }
    value { name: "SEQ_NEEDS_INCREMENTAL_STATE" number: 2 }
  }
}
message_type {
  name: "TrackDescriptor"
  field { name: "uuid" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "parent_uuid" number: 5 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "process" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.ProcessDescriptor" }
  field { name: "thread" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.ThreadDescriptor" }
  oneof_decl { name: "static_or_dynamic_name" }
}
message_type {
  name: "ProcessDescriptor"
  field { name: "pid" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "process_name" number: 6 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "ThreadDescriptor"
  field { name: "pid" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "tid" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "thread_name" number: 5 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "TrackEvent"
  field { name: "category_iids" number: 3 label: LABEL_REPEATED type: TYPE_UINT64 }
  field { name: "name_iid" number: 10 label: LABEL_OPTIONAL type: TYPE_UINT64 oneof_index: 0 }
  field { name: "type" number: 9 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".perfetto.protos.TrackEvent.Type" }
  field { name: "track_uuid" number: 11 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "debug_annotations" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".perfetto.protos.DebugAnnotation" }
  oneof_decl { name: "name_field" }
  enum_type {
    name: "Type"
    value { name: "TYPE_UNSPECIFIED" number: 0 }
    value { name: "TYPE_SLICE_BEGIN" number: 1 }
    value { name: "TYPE_SLICE_END" number: 2 }
    value { name: "TYPE_INSTANT" number: 3 }
    value { name: "TYPE_COUNTER" number: 4 }
  }
}
message_type {
  name: "DebugAnnotation"
  field { name: "name_iid" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 oneof_index: 0 }
  field { name: "bool_value" number: 2 label: LABEL_OPTIONAL type: TYPE_BOOL oneof_index: 1 }
  field { name: "uint_value" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT64 oneof_index: 1 }
  field { name: "int_value" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 1 }
  field { name: "string_value" number: 6 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 1 }
  oneof_decl { name: "name_field" }
  oneof_decl { name: "value" }
}
message_type {
  name: "InternedData"
  field { name: "event_categories" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".perfetto.protos.EventCategory" }
  field { name: "event_names" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".perfetto.protos.EventName" }
  field { name: "debug_annotation_names" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".perfetto.protos.DebugAnnotationName" }
}
message_type {
  name: "EventCategory"
  field { name: "iid" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "EventName"
  field { name: "iid" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "DebugAnnotationName"
  field { name: "iid" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
`

// Values of Perfetto's protos that Decode checks against, written here
// again rather than taken from package perfetto, so that a wrong constant
// there is caught.
const (
	sequenceID                 = 1 // the one trusted_packet_sequence_id package perfetto uses
	seqIncrementalStateCleared = 1 // TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
	seqNeedsIncrementalState   = 2 // TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
	typeSliceBegin             = 1 // TrackEvent.TYPE_SLICE_BEGIN
	typeSliceEnd               = 2 // TrackEvent.TYPE_SLICE_END
	typeInstant                = 3 // TrackEvent.TYPE_INSTANT
)

var schema = sync.OnceValues(func() (protoreflect.FileDescriptor, error) {
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(schemaText), &fdp); err != nil {
		return nil, err
	}
	return protodesc.NewFile(&fdp, nil)
})

// Descriptor returns the descriptor of message name ("Trace",
// "TracePacket", "TrackEvent", …) of the schema subset.
func Descriptor(name string) (protoreflect.MessageDescriptor, error) {
	fd, err := schema()
	if err != nil {
		return nil, fmt.Errorf("perfettotest: schema: %w", err)
	}
	md := fd.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("perfettotest: no message %s in the schema", name)
	}
	return md, nil
}

// Parse unmarshals data as perfetto.protos.Trace and checks every message
// in it (see Check).
func Parse(data []byte) (protoreflect.Message, error) {
	md, err := Descriptor("Trace")
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("unmarshal Trace: %w", err)
	}
	if errs := Check(m, "Trace"); len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return m, nil
}

// Check walks m, found at path, and returns a description of every unknown
// field, every enum value the enum does not define and every string that
// is not valid UTF-8.
func Check(m protoreflect.Message, path string) []string {
	var errs []string
	if u := m.GetUnknown(); len(u) > 0 {
		errs = append(errs, fmt.Sprintf("%s: %d bytes of unknown fields: % x", path, len(u), []byte(u)))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				errs = append(errs, Check(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))...)
			}
		case fd.Message() != nil:
			errs = append(errs, Check(v.Message(), p)...)
		case fd.Kind() == protoreflect.StringKind && !utf8.ValidString(v.String()):
			errs = append(errs, fmt.Sprintf("%s: invalid UTF-8 %q", p, v.String()))
		case fd.Kind() == protoreflect.EnumKind && fd.Enum().Values().ByNumber(v.Enum()) == nil:
			// dynamicpb keeps unknown values of a closed (proto2) enum
			// rather than moving them to the unknown fields.
			errs = append(errs, fmt.Sprintf("%s: %d is not a %s", p, v.Enum(), fd.Enum().FullName()))
		}
		return true
	})
	return errs
}

// A Track is a process, thread or async track, from its latest
// TrackDescriptor.
type Track struct {
	UUID, Parent uint64
	Process      bool // a process track
	// Async is a named track under a process (Parent), neither a process
	// nor a thread; its PID is the process's and its TID 0. A track that
	// is neither Process nor Async is a thread track.
	Async    bool
	PID, TID int32
	Name     string
}

// An Arg is a debug annotation, its name resolved.
type Arg struct {
	Name string
	Kind string // "bool", "uint", "int" or "string": which value field is set
	Val  any    // bool, uint64, int64 or string
}

// An Event is a TYPE_INSTANT TrackEvent, its interned strings resolved.
type Event struct {
	TS       uint64
	PID, TID int32  // from the thread track the event is on
	Category string // "" when the event has none
	Name     string
	Args     []Arg
}

// A Slice is a TYPE_SLICE_BEGIN TrackEvent and the TYPE_SLICE_END that
// closed it, as the trace processor pairs them: on one track, an end
// closes the innermost open slice.
type Slice struct {
	Track    uint64 // the uuid of the track it is on
	PID, TID int32  // of the track (TID 0 on an async track)
	TS       uint64
	// Dur is the end's time minus TS, or -1 for a slice never ended (the
	// trace processor's kPendingDuration: the UI's "Did not end").
	Dur      int64
	Depth    int    // how many slices of its track it is inside
	Category string // "" when the event has none
	Name     string
	Args     []Arg // of the begin
	EndArgs  []Arg // of the end, which the trace processor adds to Args
}

// A Trace is the decoded content of a trace.
type Trace struct {
	Tracks map[uint64]Track // the latest descriptor of each uuid
	Events []Event          // the instants, in file order
	Slices []Slice          // in the order they began
}

// Processes maps each pid to its process track.
func (t *Trace) Processes() map[int32]Track {
	m := map[int32]Track{}
	for _, tk := range t.Tracks {
		if tk.Process {
			m[tk.PID] = tk
		}
	}
	return m
}

// Threads maps each (pid, tid) to its thread track.
func (t *Trace) Threads() map[[2]int32]Track {
	m := map[[2]int32]Track{}
	for _, tk := range t.Tracks {
		if !tk.Process && !tk.Async {
			m[[2]int32{tk.PID, tk.TID}] = tk
		}
	}
	return m
}

// get returns field name of m; the name is one of the schema's.
func get(m protoreflect.Message, name string) protoreflect.Value {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("perfettotest: no field " + name + " in " + string(m.Descriptor().Name()))
	}
	return m.Get(fd)
}

func has(m protoreflect.Message, name string) bool {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("perfettotest: no field " + name + " in " + string(m.Descriptor().Name()))
	}
	return m.Has(fd)
}

// Decode parses data (see Parse) and resolves it as the trace processor
// would, returning an error for anything it would reject or drop, or that
// package perfetto promises not to write: a packet off sequence 1,
// incremental state used before it is cleared or cleared twice, interned
// data in a packet without SEQ_NEEDS_INCREMENTAL_STATE, an undefined,
// zero or redefined interned id, a track with uuid 0, a second process
// track for a pid, a thread track whose parent is not its process's
// track, a track that is neither process nor thread and has no name or
// no process track as parent, a track redescribed with other ids, an
// event that is not TYPE_INSTANT, TYPE_SLICE_BEGIN or TYPE_SLICE_END, has
// no timestamp or more than one category, an instant or begin without a
// name, an end with a name or a category (package perfetto writes none),
// an end on a track with no open slice (the trace processor ignores it),
// a begin or end whose time is before the previous one's on its track, an
// instant on an async track, an event on an undescribed track or on a
// process track, an annotation without a name or a value, and a packet
// with no data but the first. Slices left open are not an error: their
// Dur is -1.
func Decode(data []byte) (*Trace, error) {
	tr, err := Parse(data)
	if err != nil {
		return nil, err
	}
	out := &Trace{Tracks: map[uint64]Track{}}
	procTrack := map[int32]uint64{}
	open := map[uint64][]int{}    // track uuid → indexes in out.Slices of its open slices
	lastTS := map[uint64]uint64{} // track uuid → time of its latest begin or end
	interned := map[string]map[uint64]string{
		"event_categories": {}, "event_names": {}, "debug_annotation_names": {},
	}
	cleared := false
	packets := get(tr, "packet").List()
	for i := range packets.Len() {
		p := packets.Get(i).Message()
		fail := func(format string, args ...any) (*Trace, error) {
			return nil, fmt.Errorf("packet %d: %s", i, fmt.Sprintf(format, args...))
		}
		if got := get(p, "trusted_packet_sequence_id").Uint(); got != sequenceID {
			return fail("trusted_packet_sequence_id %d, want %d", got, sequenceID)
		}
		flags := get(p, "sequence_flags").Uint()
		if i == 0 && flags&seqIncrementalStateCleared == 0 {
			return fail("sequence_flags %d lacks SEQ_INCREMENTAL_STATE_CLEARED", flags)
		}
		if flags&seqIncrementalStateCleared != 0 {
			if i != 0 {
				return fail("incremental state cleared again")
			}
			cleared = true
		}
		if has(p, "interned_data") {
			if flags&seqNeedsIncrementalState == 0 {
				return fail("interned_data without SEQ_NEEDS_INCREMENTAL_STATE")
			}
			in := get(p, "interned_data").Message()
			for _, field := range []string{"event_categories", "event_names", "debug_annotation_names"} {
				table := interned[field]
				l := get(in, field).List()
				for j := range l.Len() {
					e := l.Get(j).Message()
					iid, name := get(e, "iid").Uint(), get(e, "name").String()
					if iid == 0 {
						return fail("%s iid 0", field)
					}
					if old, ok := table[iid]; ok {
						return fail("%s iid %d redefined (%q, was %q)", field, iid, name, old)
					}
					table[iid] = name
				}
			}
		}
		switch {
		case has(p, "track_descriptor"):
			td := get(p, "track_descriptor").Message()
			d := Track{UUID: get(td, "uuid").Uint(), Parent: get(td, "parent_uuid").Uint()}
			if d.UUID == 0 {
				return fail("track uuid 0")
			}
			switch {
			case has(td, "process"):
				pd := get(td, "process").Message()
				d.Process, d.PID, d.Name = true, int32(get(pd, "pid").Int()), get(pd, "process_name").String()
				if u, ok := procTrack[d.PID]; ok && u != d.UUID {
					return fail("second process track %d for pid %d (first %d)", d.UUID, d.PID, u)
				}
				procTrack[d.PID] = d.UUID
			case has(td, "thread"):
				th := get(td, "thread").Message()
				d.PID, d.TID, d.Name = int32(get(th, "pid").Int()), int32(get(th, "tid").Int()), get(th, "thread_name").String()
				if u, ok := procTrack[d.PID]; !ok || u != d.Parent {
					return fail("thread track %d parent %d, process %d track %d", d.UUID, d.Parent, d.PID, u)
				}
			default:
				if !has(td, "name") {
					return fail("track %d neither process nor thread, and unnamed", d.UUID)
				}
				d.Async, d.Name = true, get(td, "name").String()
				var ok bool
				for pid, u := range procTrack {
					if u == d.Parent {
						d.PID, ok = pid, true
					}
				}
				if !ok {
					return fail("async track %d parent %d is no process track", d.UUID, d.Parent)
				}
			}
			if old, ok := out.Tracks[d.UUID]; ok && (old.Process != d.Process || old.Async != d.Async || old.PID != d.PID || old.TID != d.TID || old.Parent != d.Parent) {
				return fail("track %d redescribed as %+v, was %+v", d.UUID, d, old)
			}
			out.Tracks[d.UUID] = d
		case has(p, "track_event"):
			if !cleared || flags&seqNeedsIncrementalState == 0 {
				return fail("track event uses interning; flags %d", flags)
			}
			if !has(p, "timestamp") {
				return fail("track event without timestamp")
			}
			te := get(p, "track_event").Message()
			typ := get(te, "type").Enum()
			if typ != typeInstant && typ != typeSliceBegin && typ != typeSliceEnd {
				return fail("type %d, want TYPE_INSTANT, TYPE_SLICE_BEGIN or TYPE_SLICE_END", typ)
			}
			uuid := get(te, "track_uuid").Uint()
			tk, ok := out.Tracks[uuid]
			if !ok || tk.Process {
				return fail("event on track %d, described %v, process %v", uuid, ok, tk.Process)
			}
			if tk.Async && typ == typeInstant {
				return fail("instant on async track %d", uuid)
			}
			// The trace processor sorts events by time before pairing
			// begins and ends: pairing them in file order is the same only
			// if they are in time order.
			if ts := get(p, "timestamp").Uint(); typ != typeInstant {
				if last, ok := lastTS[uuid]; ok && ts < last {
					return fail("slice event at %d on track %d after one at %d", ts, uuid, last)
				}
				lastTS[uuid] = ts
			}
			var undefined error
			lookup := func(field string, iid uint64) string {
				s, ok := interned[field][iid]
				if !ok && undefined == nil {
					undefined = fmt.Errorf("packet %d: %s iid %d undefined", i, field, iid)
				}
				return s
			}
			ev := Event{TS: get(p, "timestamp").Uint(), PID: tk.PID, TID: tk.TID}
			cats := get(te, "category_iids").List()
			if cats.Len() > 1 {
				return fail("%d categories", cats.Len())
			}
			if cats.Len() == 1 {
				ev.Category = lookup("event_categories", cats.Get(0).Uint())
			}
			if typ == typeSliceEnd {
				if has(te, "name_iid") || cats.Len() > 0 {
					return fail("slice end with a name or category")
				}
				if len(open[uuid]) == 0 {
					return fail("slice end on track %d with no open slice", uuid)
				}
			} else {
				if !has(te, "name_iid") {
					return fail("no name_iid")
				}
				ev.Name = lookup("event_names", get(te, "name_iid").Uint())
			}
			anns := get(te, "debug_annotations").List()
			for j := range anns.Len() {
				a := anns.Get(j).Message()
				if !has(a, "name_iid") {
					return fail("annotation %d without name_iid", j)
				}
				da := Arg{Name: lookup("debug_annotation_names", get(a, "name_iid").Uint())}
				switch {
				case has(a, "bool_value"):
					da.Kind, da.Val = "bool", get(a, "bool_value").Bool()
				case has(a, "uint_value"):
					da.Kind, da.Val = "uint", get(a, "uint_value").Uint()
				case has(a, "int_value"):
					da.Kind, da.Val = "int", get(a, "int_value").Int()
				case has(a, "string_value"):
					da.Kind, da.Val = "string", get(a, "string_value").String()
				default:
					return fail("annotation %d without value", j)
				}
				ev.Args = append(ev.Args, da)
			}
			if undefined != nil {
				return nil, undefined
			}
			switch typ {
			case typeInstant:
				out.Events = append(out.Events, ev)
			case typeSliceBegin:
				open[uuid] = append(open[uuid], len(out.Slices))
				out.Slices = append(out.Slices, Slice{
					Track: uuid, PID: tk.PID, TID: tk.TID, TS: ev.TS, Dur: -1, Depth: len(open[uuid]) - 1,
					Category: ev.Category, Name: ev.Name, Args: ev.Args,
				})
			case typeSliceEnd:
				st := open[uuid]
				s := &out.Slices[st[len(st)-1]]
				open[uuid] = st[:len(st)-1]
				s.Dur, s.EndArgs = int64(ev.TS-s.TS), ev.Args
			}
		default:
			if i != 0 || has(p, "interned_data") {
				return fail("no data")
			}
		}
	}
	return out, nil
}
