package eventdef

import "testing"

const bench5 = "req u32 status; s64 latency_ns; char[16] method; __rel_loc char[] path; u8 retry"

func benchRecord(b *testing.B) (*Event, []byte) {
	ev := mustParse(b, bench5)
	var enc Encoder
	enc.Reset(ev, nil)
	enc.Uint(200)
	enc.Int(123456)
	enc.String("GET")
	enc.String("/api/v1/items")
	enc.Uint(0)
	p, err := enc.Payload()
	if err != nil {
		b.Fatal(err)
	}
	return ev, record(p)
}

// BenchmarkDecodePrint decodes a 5-field record and prints its trace line
// into reused buffers. Target (issue 2): ≤ 200 ns.
func BenchmarkDecodePrint(b *testing.B) {
	ev, rec := benchRecord(b)
	vals := make([]Value, 0, 8)
	line := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		vals = ev.Decode(vals[:0], rec)
		line = ev.AppendTrace(line[:0], "req", rec)
	}
	_ = vals
}

// BenchmarkAppendTrace prints only.
func BenchmarkAppendTrace(b *testing.B) {
	ev, rec := benchRecord(b)
	line := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		line = ev.AppendTrace(line[:0], "req", rec)
	}
}

// BenchmarkEncode builds a 5-field payload in a reused buffer: 0 allocs.
func BenchmarkEncode(b *testing.B) {
	ev := mustParse(b, bench5)
	var enc Encoder
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		enc.Reset(ev, buf)
		enc.Uint(200)
		enc.Int(123456)
		enc.String("GET")
		enc.String("/api/v1/items")
		enc.Uint(0)
		p, err := enc.Payload()
		if err != nil {
			b.Fatal(err)
		}
		buf = p[:0]
	}
}

// BenchmarkValidate runs the write path's checks on a record.
func BenchmarkValidate(b *testing.B) {
	ev, rec := benchRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.CheckSize(len(rec) - HeaderSize); err != nil {
			b.Fatal(err)
		}
		if err := ev.Validate(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bench5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatchArgs(b *testing.B) {
	ev := mustParse(b, bench5)
	args := "u32 status;s64 latency_ns; char[16] method; __rel_loc char[] path; u8 retry"
	b.ReportAllocs()
	for b.Loop() {
		if !ev.MatchArgs(args) {
			b.Fatal("no match")
		}
	}
}
