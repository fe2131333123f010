package perfetto

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schemaText is the subset of Perfetto's schema that the Writer uses, with
// Perfetto's message names, field numbers, types, labels and oneofs,
// copied from:
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
// All are proto2 like Perfetto's, so enums are closed: checkMessage also
// rejects a TrackEvent.type outside TrackEvent.Type.
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
  field { name: "parent_uuid" number: 5 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "process" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.ProcessDescriptor" }
  field { name: "thread" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".perfetto.protos.ThreadDescriptor" }
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

var schemaOnce = sync.OnceValues(func() (protoreflect.FileDescriptor, error) {
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(schemaText), &fdp); err != nil {
		return nil, err
	}
	return protodesc.NewFile(&fdp, nil)
})

func schema(t testing.TB) protoreflect.FileDescriptor {
	t.Helper()
	fd, err := schemaOnce()
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return fd
}

func msgDesc(t testing.TB, name string) protoreflect.MessageDescriptor {
	t.Helper()
	md := schema(t).Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no message %s in schema", name)
	}
	return md
}

// parseTrace unmarshals data as perfetto.protos.Trace and checks every
// message in it: no unknown fields, every string valid UTF-8.
func parseTrace(t testing.TB, data []byte) protoreflect.Message {
	t.Helper()
	m := dynamicpb.NewMessage(msgDesc(t, "Trace"))
	if err := proto.Unmarshal(data, m); err != nil {
		t.Fatalf("unmarshal Trace: %v", err)
	}
	if errs := checkMessage(m, "Trace"); len(errs) > 0 {
		for _, e := range errs {
			t.Error(e)
		}
		t.FailNow()
	}
	return m
}

// checkMessage walks m and returns a description of every unknown field,
// every enum value the enum does not define and every string that is not
// valid UTF-8.
func checkMessage(m protoreflect.Message, path string) []string {
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
				errs = append(errs, checkMessage(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))...)
			}
		case fd.Message() != nil:
			errs = append(errs, checkMessage(v.Message(), p)...)
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

// The decoded content of a trace, with interned ids resolved and tracks
// linked.

type dTrack struct {
	UUID, Parent uint64
	Process      bool // a process track, else a thread track
	PID, TID     int32
	Name         string
}

type dArg struct {
	Name string
	Kind string // bool, uint, int, string
	Val  any
}

type dEvent struct {
	TS       uint64
	PID, TID int32 // from the thread track the event is on
	Category string
	Name     string
	Args     []dArg
}

type decoded struct {
	Tracks map[uint64]dTrack // the latest descriptor for each uuid
	Events []dEvent
}

// get returns field name of m.
func get(m protoreflect.Message, name string) protoreflect.Value {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(m.Descriptor().Name()))
	}
	return m.Get(fd)
}

func has(m protoreflect.Message, name string) bool {
	return m.Has(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

// decodeTrace parses data and resolves it as the trace processor would,
// failing on anything it would reject or drop: a packet off sequence 1,
// incremental state used before it is cleared, an undefined or redefined
// interned id, an event on an undescribed track or on a process track, a
// thread track whose parent is not its process's track.
func decodeTrace(t testing.TB, data []byte) decoded {
	t.Helper()
	tr := parseTrace(t, data)
	out := decoded{Tracks: map[uint64]dTrack{}}
	procTrack := map[int32]uint64{}
	interned := map[string]map[uint64]string{
		"event_categories": {}, "event_names": {}, "debug_annotation_names": {},
	}
	cleared := false
	packets := get(tr, "packet").List()
	for i := range packets.Len() {
		p := packets.Get(i).Message()
		if got := get(p, "trusted_packet_sequence_id").Uint(); got != sequenceID {
			t.Fatalf("packet %d: trusted_packet_sequence_id %d", i, got)
		}
		flags := get(p, "sequence_flags").Uint()
		if i == 0 && flags&seqIncrementalStateCleared == 0 {
			t.Fatalf("packet 0: sequence_flags %d lacks SEQ_INCREMENTAL_STATE_CLEARED", flags)
		}
		if flags&seqIncrementalStateCleared != 0 {
			if i != 0 {
				t.Fatalf("packet %d: incremental state cleared again", i)
			}
			cleared = true
		}
		if has(p, "interned_data") {
			if flags&seqNeedsIncrementalState == 0 {
				t.Errorf("packet %d: interned_data without SEQ_NEEDS_INCREMENTAL_STATE", i)
			}
			in := get(p, "interned_data").Message()
			for field, table := range interned {
				l := get(in, field).List()
				for j := range l.Len() {
					e := l.Get(j).Message()
					iid, name := get(e, "iid").Uint(), get(e, "name").String()
					if iid == 0 {
						t.Fatalf("packet %d: %s iid 0", i, field)
					}
					if old, ok := table[iid]; ok {
						t.Fatalf("packet %d: %s iid %d redefined (%q, was %q)", i, field, iid, name, old)
					}
					table[iid] = name
				}
			}
		}
		switch {
		case has(p, "track_descriptor"):
			td := get(p, "track_descriptor").Message()
			d := dTrack{UUID: get(td, "uuid").Uint(), Parent: get(td, "parent_uuid").Uint()}
			if d.UUID == 0 {
				t.Fatalf("packet %d: track uuid 0", i)
			}
			switch {
			case has(td, "process"):
				pd := get(td, "process").Message()
				d.Process, d.PID, d.Name = true, int32(get(pd, "pid").Int()), get(pd, "process_name").String()
				if u, ok := procTrack[d.PID]; ok && u != d.UUID {
					t.Fatalf("packet %d: second process track %d for pid %d (first %d)", i, d.UUID, d.PID, u)
				}
				procTrack[d.PID] = d.UUID
			case has(td, "thread"):
				th := get(td, "thread").Message()
				d.PID, d.TID, d.Name = int32(get(th, "pid").Int()), int32(get(th, "tid").Int()), get(th, "thread_name").String()
				if u, ok := procTrack[d.PID]; !ok || u != d.Parent {
					t.Fatalf("packet %d: thread track %d parent %d, process %d track %d", i, d.UUID, d.Parent, d.PID, u)
				}
			default:
				t.Fatalf("packet %d: track %d neither process nor thread", i, d.UUID)
			}
			if old, ok := out.Tracks[d.UUID]; ok && (old.Process != d.Process || old.PID != d.PID || old.TID != d.TID || old.Parent != d.Parent) {
				t.Fatalf("packet %d: track %d redescribed as %+v, was %+v", i, d.UUID, d, old)
			}
			out.Tracks[d.UUID] = d
		case has(p, "track_event"):
			if !cleared || flags&seqNeedsIncrementalState == 0 {
				t.Fatalf("packet %d: track event uses interning; flags %d", i, flags)
			}
			if !has(p, "timestamp") {
				t.Fatalf("packet %d: track event without timestamp", i)
			}
			te := get(p, "track_event").Message()
			if typ := get(te, "type").Enum(); typ != eventTypeInstant {
				t.Fatalf("packet %d: type %d", i, typ)
			}
			tk, ok := out.Tracks[get(te, "track_uuid").Uint()]
			if !ok || tk.Process {
				t.Fatalf("packet %d: event on track %d, described %v, process %v", i, get(te, "track_uuid").Uint(), ok, tk.Process)
			}
			lookup := func(field string, iid uint64) string {
				s, ok := interned[field][iid]
				if !ok {
					t.Fatalf("packet %d: %s iid %d undefined", i, field, iid)
				}
				return s
			}
			ev := dEvent{TS: get(p, "timestamp").Uint(), PID: tk.PID, TID: tk.TID}
			cats := get(te, "category_iids").List()
			if cats.Len() > 1 {
				t.Fatalf("packet %d: %d categories", i, cats.Len())
			}
			if cats.Len() == 1 {
				ev.Category = lookup("event_categories", cats.Get(0).Uint())
			}
			if !has(te, "name_iid") {
				t.Fatalf("packet %d: no name_iid", i)
			}
			ev.Name = lookup("event_names", get(te, "name_iid").Uint())
			anns := get(te, "debug_annotations").List()
			for j := range anns.Len() {
				a := anns.Get(j).Message()
				if !has(a, "name_iid") {
					t.Fatalf("packet %d: annotation %d without name_iid", i, j)
				}
				da := dArg{Name: lookup("debug_annotation_names", get(a, "name_iid").Uint())}
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
					t.Fatalf("packet %d: annotation %d without value", i, j)
				}
				ev.Args = append(ev.Args, da)
			}
			out.Events = append(out.Events, ev)
		default:
			if i != 0 || p.Has(p.Descriptor().Fields().ByName("interned_data")) {
				t.Fatalf("packet %d: no data", i)
			}
		}
	}
	return out
}

// The checker itself must catch what it is there to catch.
func TestCheckerCatchesBadEncoding(t *testing.T) {
	good := func(extra ...[]byte) []byte {
		var te []byte
		te = appendVarintField(te, fieldEventTrackUUID, 1)
		te = appendVarintField(te, fieldEventType, eventTypeInstant)
		for _, x := range extra {
			te = append(te, x...)
		}
		var p []byte
		p = appendVarintField(p, fieldPacketTimestamp, 5)
		p = appendBytesField(p, fieldPacketTrackEvent, te)
		return appendBytesField(nil, fieldTracePacket, p)
	}
	tr := dynamicpb.NewMessage(msgDesc(t, "Trace"))
	if err := proto.Unmarshal(good(), tr); err != nil {
		t.Fatal(err)
	}
	if errs := checkMessage(tr, "Trace"); len(errs) != 0 {
		t.Fatalf("well-formed message flagged: %v", errs)
	}

	for _, tc := range []struct {
		name string
		data []byte
	}{
		// TrackEvent.track_uuid (11) as a length-delimited field.
		{"wrong wire type", good(appendBytesField(nil, fieldEventTrackUUID, []byte{1}))},
		// TrackEvent field 23 is the non-interned name, which the Writer
		// does not use and the subset does not declare.
		{"undeclared field", good(appendStringField(nil, 23, "x"))},
		// TrackEvent.Type has no value 7; proto2 enums are closed.
		{"unknown enum value", good(appendVarintField(nil, fieldEventType, 7))},
		// A string field that is not UTF-8.
		{"invalid UTF-8", good(appendBytesField(nil, fieldEventAnnotation,
			append(appendVarintField(nil, fieldAnnNameIID, 1), rawStringField(fieldAnnString, "\xff")...)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := dynamicpb.NewMessage(msgDesc(t, "Trace"))
			if err := proto.Unmarshal(tc.data, tr); err != nil {
				t.Fatal(err)
			}
			if errs := checkMessage(tr, "Trace"); len(errs) == 0 {
				t.Fatal("not caught")
			} else {
				t.Log(errs)
			}
		})
	}

	// And the same through the writer's own output: flip the wire type of
	// the first timestamp and the whole check must fail.
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Instant(7, 1, 1, "c", "n", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// data[0:2] is the tag and length of the first packet, whose first
	// field is its timestamp.
	const tsTag = fieldPacketTimestamp<<3 | byte(protowire.VarintType)
	if data[2] != tsTag {
		t.Fatalf("first packet starts % x, want the timestamp tag %#x", data[:3], tsTag)
	}
	data[2] = fieldPacketTimestamp<<3 | byte(protowire.Fixed32Type)
	tr = dynamicpb.NewMessage(msgDesc(t, "Trace"))
	if err := proto.Unmarshal(data, tr); err == nil && len(checkMessage(tr, "Trace")) == 0 {
		t.Fatal("corrupted writer output not caught")
	}
}

// rawStringField is a string field with no UTF-8 repair, to build bad
// input for the checker.
func rawStringField(f protowire.Number, s string) []byte {
	return appendBytesField(nil, f, []byte(s))
}

func appendBytesField(b []byte, f protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}
