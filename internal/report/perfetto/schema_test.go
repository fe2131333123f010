package perfetto

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
)

// The decoded content of a trace, as perfettotest gives it, in local types
// so that the tests can write arguments as unkeyed literals.
type (
	dTrack = perfettotest.Track
	dArg   struct {
		Name string
		Kind string // bool, uint, int, string
		Val  any
	}
	dEvent struct {
		TS       uint64
		PID, TID int32
		Category string
		Name     string
		Args     []dArg
	}
	decoded struct {
		Tracks map[uint64]dTrack
		Events []dEvent
	}
)

// decodeTrace checks data against Perfetto's schema and decodes it, failing
// the test on anything the trace processor would reject or drop (see
// perfettotest.Decode).
func decodeTrace(t testing.TB, data []byte) decoded {
	t.Helper()
	d, err := perfettotest.Decode(data)
	if err != nil {
		t.Fatalf("decode trace: %v", err)
	}
	out := decoded{Tracks: d.Tracks}
	for _, e := range d.Events {
		ev := dEvent{TS: e.TS, PID: e.PID, TID: e.TID, Category: e.Category, Name: e.Name}
		for _, a := range e.Args {
			ev.Args = append(ev.Args, dArg(a))
		}
		out.Events = append(out.Events, ev)
	}
	return out
}

// The checker itself must catch what it is there to catch: bad encodings
// (perfettotest.Parse) and traces that encode well but that the trace
// processor would misread (perfettotest.Decode).
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
	if _, err := perfettotest.Parse(good()); err != nil {
		t.Fatalf("well-formed message flagged: %v", err)
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
		// Not a protobuf at all: a length past the end.
		{"truncated", good()[:5]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := perfettotest.Parse(tc.data); err == nil {
				t.Fatal("not caught")
			} else {
				t.Log(err)
			}
			if _, err := perfettotest.Decode(tc.data); err == nil {
				t.Fatal("Decode did not catch it")
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
	if _, err := perfettotest.Decode(data); err != nil {
		t.Fatalf("writer output flagged: %v", err)
	}
	// data[0:2] is the tag and length of the first packet, whose first
	// field is its timestamp.
	const tsTag = fieldPacketTimestamp<<3 | byte(protowire.VarintType)
	if data[2] != tsTag {
		t.Fatalf("first packet starts % x, want the timestamp tag %#x", data[:3], tsTag)
	}
	data[2] = fieldPacketTimestamp<<3 | byte(protowire.Fixed32Type)
	if _, err := perfettotest.Parse(data); err == nil {
		t.Fatal("corrupted writer output not caught")
	}
}

// Traces that parse but that the trace processor would misread: Decode
// must reject each.
func TestDecodeCatchesBadTraces(t *testing.T) {
	// packet builds a TracePacket on sequence 1 with flags and fields.
	packet := func(flags uint64, fields ...[]byte) []byte {
		p := appendVarintField(nil, fieldPacketSequenceID, sequenceID)
		if flags != 0 {
			p = appendVarintField(p, fieldPacketSequenceFlags, flags)
		}
		for _, f := range fields {
			p = append(p, f...)
		}
		return appendBytesField(nil, fieldTracePacket, p)
	}
	process := func(uuid uint64, pid int32) []byte {
		td := appendVarintField(nil, fieldTrackUUID, uuid)
		td = appendBytesField(td, fieldTrackProcess, appendVarintField(nil, fieldProcessPID, uint64(pid)))
		return appendBytesField(nil, fieldPacketTrackDescriptor, td)
	}
	thread := func(uuid, parent uint64, pid, tid int32) []byte {
		td := appendVarintField(nil, fieldTrackUUID, uuid)
		td = appendVarintField(td, fieldTrackParentUUID, parent)
		th := appendVarintField(nil, fieldThreadPID, uint64(pid))
		th = appendVarintField(th, fieldThreadTID, uint64(tid))
		td = appendBytesField(td, fieldTrackThread, th)
		return appendBytesField(nil, fieldPacketTrackDescriptor, td)
	}
	interned := func(field protowire.Number, iid uint64, name string) []byte {
		return appendBytesField(nil, fieldPacketInternedData, appendInterned(nil, field, iid, name))
	}
	event := func(track, nameIID uint64, extra ...[]byte) []byte {
		te := appendVarintField(nil, fieldEventTrackUUID, track)
		te = appendVarintField(te, fieldEventType, eventTypeInstant)
		te = appendVarintField(te, fieldEventNameIID, nameIID)
		for _, x := range extra {
			te = append(te, x...)
		}
		return append(appendVarintField(nil, fieldPacketTimestamp, 9), appendBytesField(nil, fieldPacketTrackEvent, te)...)
	}
	async := func(uuid, parent uint64, name string, named bool) []byte {
		td := appendVarintField(nil, fieldTrackUUID, uuid)
		td = appendVarintField(td, fieldTrackParentUUID, parent)
		if named {
			td = appendStringField(td, fieldTrackName, name)
		}
		return appendBytesField(nil, fieldPacketTrackDescriptor, td)
	}
	// slice is a begin (named nameIID) or, with nameIID 0, an end at ts.
	slice := func(track, nameIID, ts uint64, extra ...[]byte) []byte {
		te := appendVarintField(nil, fieldEventTrackUUID, track)
		if nameIID != 0 {
			te = appendVarintField(te, fieldEventType, eventTypeSliceBegin)
			te = appendVarintField(te, fieldEventNameIID, nameIID)
		} else {
			te = appendVarintField(te, fieldEventType, eventTypeSliceEnd)
		}
		for _, x := range extra {
			te = append(te, x...)
		}
		return append(appendVarintField(nil, fieldPacketTimestamp, ts), appendBytesField(nil, fieldPacketTrackEvent, te)...)
	}
	const need = seqNeedsIncrementalState
	head := append(packet(seqIncrementalStateCleared, process(1, 10)), packet(0, thread(2, 1, 10, 11))...)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	ok := cat(head, packet(need, interned(fieldInternedName, 1, "e"), event(2, 1)))
	if d, err := perfettotest.Decode(ok); err != nil || len(d.Events) != 1 || d.Events[0].Name != "e" {
		t.Fatalf("good trace: %+v, %v", d, err)
	}
	okSlices := cat(head, packet(0, async(3, 1, "a", true)), packet(need, interned(fieldInternedName, 1, "e"), slice(2, 1, 5)),
		packet(need, slice(3, 1, 6)), packet(need, slice(2, 0, 7)))
	if d, err := perfettotest.Decode(okSlices); err != nil || len(d.Slices) != 2 || d.Slices[0].Dur != 2 || d.Slices[1].Dur != -1 ||
		d.Tracks[3] != (dTrack{UUID: 3, Parent: 1, Async: true, PID: 10, Name: "a"}) {
		t.Fatalf("good trace with slices: %+v, %v", d, err)
	}
	beginE := packet(need, interned(fieldInternedName, 1, "e"), slice(2, 1, 5))
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"end without begin", cat(head, packet(need, slice(2, 0, 5)))},
		{"end on another track", cat(head, packet(0, async(3, 1, "a", true)), beginE, packet(need, slice(3, 0, 6)))},
		{"end with a name", cat(head, beginE, packet(need, slice(2, 0, 6, appendVarintField(nil, fieldEventNameIID, 1))))},
		{"end before its begin", cat(head, beginE, packet(need, slice(2, 0, 4)))},
		{"async track without name", cat(head, packet(0, async(3, 1, "", false)))},
		{"async track under a thread", cat(head, packet(0, async(3, 2, "a", true)))},
		{"instant on async track", cat(head, packet(0, async(3, 1, "a", true)), packet(need, interned(fieldInternedName, 1, "e"), event(3, 1)))},
		{"no sequence id", appendBytesField(nil, fieldTracePacket, appendVarintField(nil, fieldPacketSequenceFlags, seqIncrementalStateCleared))},
		{"first packet does not clear", packet(need, process(1, 10))},
		{"cleared twice", cat(head, packet(seqIncrementalStateCleared|need, interned(fieldInternedName, 1, "e"), event(2, 1)))},
		{"undefined name", cat(head, packet(need, event(2, 1)))},
		{"iid 0", cat(head, packet(need, interned(fieldInternedName, 0, "e"), event(2, 1)))},
		{"redefined iid", cat(head, packet(need, interned(fieldInternedName, 1, "e"), event(2, 1)),
			packet(need, interned(fieldInternedName, 1, "f"), event(2, 1)))},
		{"interned without needs-state", cat(head, packet(0, interned(fieldInternedName, 1, "e"), event(2, 1)))},
		{"event on undescribed track", cat(head, packet(need, interned(fieldInternedName, 1, "e"), event(3, 1)))},
		{"event on process track", cat(head, packet(need, interned(fieldInternedName, 1, "e"), event(1, 1)))},
		{"thread under the wrong parent", cat(packet(seqIncrementalStateCleared, process(1, 10)), packet(0, thread(2, 5, 10, 11)))},
		{"second process track", cat(head, packet(0, process(3, 10)))},
		{"track redescribed", cat(head, packet(0, thread(2, 1, 10, 12)))},
		{"annotation without value", cat(head, packet(need, interned(fieldInternedName, 1, "e"),
			event(2, 1, appendBytesField(nil, fieldEventAnnotation, appendVarintField(nil, fieldAnnNameIID, 1)))))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := perfettotest.Parse(tc.data); err != nil {
				t.Fatalf("does not even parse: %v", err)
			}
			_, err := perfettotest.Decode(tc.data)
			if err == nil {
				t.Fatal("not caught")
			}
			t.Log(err)
		})
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
