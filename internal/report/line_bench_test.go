package report

import (
	"encoding/binary"
	"testing"

	"github.com/uetrace/uetrace/perfdata"
)

// lineBenchFormat is the 5-field event of the report benchmarks.
const lineBenchFormat = `name: x
ID: 1001
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:u32 a;	offset:8;	size:4;	signed:0;
	field:s64 b;	offset:12;	size:8;	signed:1;
	field:char c[8];	offset:20;	size:8;	signed:0;
	field:__rel_loc char[] msg;	offset:28;	size:4;	signed:0;
	field:u8 d;	offset:32;	size:1;	signed:0;

print fmt: "a=%u b=%lld c=%s msg=%s d=%u", REC->a, REC->b, REC->c, __get_rel_str(msg), REC->d
`

// lineBenchItem is one sample of the event, ready to print.
func lineBenchItem(b *testing.B) item {
	pe, err := perfdata.NewEvent("user_events", "x", []byte(lineBenchFormat))
	if err != nil {
		b.Fatal(err)
	}
	ev := newEvent(pe)
	ev.textName = []byte("user_events:x:")
	raw := make([]byte, 33, 52)
	ne := binary.NativeEndian
	ne.PutUint32(raw[8:], 4242)
	b64 := int64(-4242 * 1_000_003)
	ne.PutUint64(raw[12:], uint64(b64))
	copy(raw[20:], "ctx")
	msg := "request 00004242\x00"
	ne.PutUint32(raw[28:], uint32(len(msg))<<16|1) // rel_loc: after d
	raw[32] = 42
	raw = append(raw, msg...)
	return item{time: 1_004_242_000_123, cpu: 1, pid: 1000, tid: 1001, ev: ev, data: raw, heads: newHeads(1000, 1001, "worker-1001")}
}

// BenchmarkAppendJSON is one JSON line of a 5-field event, the formatters'
// share of a report.
func BenchmarkAppendJSON(b *testing.B) {
	it := lineBenchItem(b)
	var times timeDigits
	buf := appendJSON(nil, &it, &times)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		it.time++
		buf = appendJSON(buf[:0], &it, &times)
	}
}

// BenchmarkAppendText is the same sample as a perf script line.
func BenchmarkAppendText(b *testing.B) {
	it := lineBenchItem(b)
	buf := appendText(nil, &it)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		it.time++
		buf = appendText(buf[:0], &it)
	}
}
