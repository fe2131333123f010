// Package exporttest makes the events the tests and benchmarks of export
// and of the Collector's userevents receiver map — the mix: in turn a
// plain user event of 6 fields (integers of each sign, a u64 past int64, a
// char array, a __rel_loc string) and an EventHeader event of 8 fields
// with a struct, an array, an errno and an activity id, at two levels
// (two tracepoints of one layout). It is for tests: each package says
// what it expects of them itself.
package exporttest

import (
	"fmt"
	"math"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
)

// The mix's events: their tracepoints, and the ids of their formats.
const (
	XCommand = "x u32 seq; s64 neg; char[8] c; __rel_loc char[] msg; u8 d; u64 big"
	XID      = 1001
	EHInfo   = "UetraceTest_L4K5"
	EHInfoID = 1002
	EHErr    = "UetraceTest_L2K5"
	EHErrID  = 1003
)

// Activity is the activity id of the mix's EventHeader events.
var Activity = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// A Mix makes the mix's events; its memory serves each.
type Mix struct {
	x, eh *eventdef.Event
	enc   eventdef.Encoder
	b     eventheader.Builder
}

// NewMix makes a Mix.
func NewMix() *Mix {
	x, err := eventdef.Parse(XCommand)
	if err != nil {
		panic(err) // a constant that must parse
	}
	eh, err := eventdef.Parse(EHInfo + " " + eventheader.CommandTypes)
	if err != nil {
		panic(err)
	}
	return &Mix{x: x, eh: eh}
}

// Formats are the tracefs formats of the mix's events, by id.
func (m *Mix) Formats() map[uint16][]byte {
	return map[uint16][]byte{
		XID:      []byte(m.x.Format("x", XID)),
		EHInfoID: []byte(m.eh.Format(EHInfo, EHInfoID)),
		EHErrID:  []byte(m.eh.Format(EHErr, EHErrID)),
	}
}

// Event is the i-th event of the mix: the id of its format and its
// payload (the record past its common fields), valid until the next call.
// i%3 says which: 0 the plain event x — seq i, neg -i, c "c", msg
// "message <i> ünïcode", d i%256, big MaxUint64-i; 1 and 2 the EventHeader
// event "Request" at level 4 (EHInfo) and 2 (EHErr), opcode 1, id 7,
// version 2, Activity — seq i, path "/p/<i>", ok i%2 == 0, ratio i/4, pt
// {x i, y -i}, arr [uint16(i), 2, 3], err errno 2.
func (m *Mix) Event(i int) (id uint16, payload []byte, err error) {
	if i%3 == 0 {
		m.enc.Reset(m.x, nil)
		m.enc.Uint(uint64(i))
		m.enc.Int(-int64(i))
		m.enc.String("c")
		m.enc.String(fmt.Sprintf("message %d ünïcode", i))
		m.enc.Uint(uint64(i % 256))
		m.enc.Uint(math.MaxUint64 - uint64(i))
		payload, err = m.enc.Payload()
		return XID, payload, err
	}
	id, lvl := uint16(EHInfoID), eventheader.LevelInformation
	if i%3 == 2 {
		id, lvl = EHErrID, eventheader.LevelError
	}
	b := &m.b
	b.Reset("Request", eventheader.Header{Level: lvl, Opcode: 1, ID: 7, Version: 2})
	b.SetActivityID(&Activity, nil)
	b.AddInt64("seq", int64(i), 0)
	b.AddString("path", "/p/"+fmt.Sprint(i), eventheader.FormatDefault, 0)
	b.AddBool("ok", i%2 == 0, 0)
	b.AddFloat64("ratio", float64(i)/4, 0)
	b.StructField("pt", 2, 0)
	b.AddInt32("x", int32(i), 0)
	b.AddInt32("y", -int32(i), 0)
	b.ArrayField("arr", eventheader.EncodingValue16, eventheader.FormatDefault, 0, 3)
	b.AppendValue16(uint16(i))
	b.AppendValue16(2)
	b.AppendValue16(3)
	b.AddUint32("err", 2, eventheader.FormatErrno, 0)
	payload, err = b.AppendEvent(nil)
	return id, payload, err
}
