package report_test

import (
	"math"
	"testing"

	"github.com/uetrace/uetrace/perfdata"
)

// The tricky strings of the last sample: JSON escapes, control bytes,
// invalid UTF-8 (a run of three bad bytes), multi-byte runes.
const (
	trickyC   = "q\"\\"
	trickyMsg = "q\"b\\s/ nl\n tab\t cr\r ctl\x01\x1f del\x7f bad\xff\xfe\xc3 é \u2028 <&>"
)

// writeScenario writes the test file: three events (x and yy_event, and
// gone, whose format the tracing data lacks) on CPUs 0, 1 and 12, several
// processes and threads named by COMM records (one renamed, one tid reused
// by another process, one never named), samples out of time order within
// and across rounds, two LOST records, a truncated record, a loc field
// past its record, a sample of id 0 (in no attr: perf would give it to the
// first) and one of an id in no attr. The file ends without a
// FINISHED_ROUND.
//
// With forPerf, the file leaves out what perf script cannot read or reads
// otherwise (gone, whose format is missing, makes it refuse the file; it
// gives the id-0 sample to x; it prints garbage for fields outside their
// record): gone, S5, S10, S11, S13 and the id-99 sample.
//
// In time order (s: seconds):
//
//	0           COMM 100/100 server, 100/101 worker, 300/300 naïve, 400/401 old-task; the id-99 sample
//	1.000005    S1  x        cpu0  100/100
//	1.5         S2  yy_event cpu1  200/201 (never named)
//	2.0         S3  x        cpu0  100/100 (max values)
//	2.5         S4  x        cpu0  100/100 (min values)
//	2.6         S14 x        cpu1  400/401 old-task
//	2.7         S5  gone     cpu12 300/300
//	2.75        S16 x        cpu12 300/300 naïve
//	3.0000005   S6  x        cpu1  100/101 worker
//	3.1         COMM 500/401 new-task (tid 401 reused)
//	3.15        S15 yy_event cpu0  500/401
//	3.2         S7  x        cpu1  100/101 worker
//	3.3         S9  yy_event cpu0  100/100 (empty)
//	3.4         S10 x        cpu0  100/100 truncated after a
//	3.45        S11 id 0     cpu0  100/100
//	3.5         COMM 100/101 renamed
//	4.0         S8  x        cpu1  100/101 renamed
//	5.0         S13 x        cpu1  100/101 msg's loc past the record
//	12345.678901234 S12 x    cpu0  100/100 tricky strings
func writeScenario(tb testing.TB, forPerf bool) string {
	tb.Helper()
	x, y := testEvents(tb)
	attrs := []perfdata.Attr{
		attr("user_events:x", xID, xID0, xID1, xID12),
		attr("user_events:yy_event", yID, yID0, yID1),
	}
	if !forPerf {
		attrs = append(attrs, attr("user_events:gone", goneID, goneID12))
	}
	f := newFile(tb, tracingData(x.Format("x", xID), y.Format("yy_event", yID)), attrs...)
	odd := func(write func()) {
		if !forPerf {
			write()
		}
	}

	const s = 1_000_000_000
	// Round 1: names of the tasks found at start, then samples in no order.
	f.comm(xID0, 100, 100, "server", 0, 0)
	f.comm(xID0, 100, 101, "worker", 0, 0)
	f.comm(xID0, 300, 300, "naïve", 0, 0)
	f.comm(xID0, 400, 401, "old-task", 0, 0)
	odd(func() { f.check(f.w.WriteRecord(sampleRecord(unknownID, 7, 8, 9, 10, []byte{1, 2, 3, 4}))) })
	f.sample(xID1, 100, 101, 3*s+500, 1, xRaw(tb, x, 101, 6, 6, "c6", "worker msg", 6))
	f.sample(xID0, 100, 100, 2*s, 0, xRaw(tb, x, 100, math.MaxUint32, math.MaxInt64, "12345678", "", math.MaxUint8))
	f.sample(xID0, 100, 100, 1*s+5000, 0, xRaw(tb, x, 100, 1, -1, "c1", "hello", 1))
	f.sample(yID1, 200, 201, 1*s+s/2, 1, yRaw(tb, y, 201, math.MaxUint64, math.MinInt8, math.MinInt16,
		[]byte{1, 2, 3, 4, 5, 6}, []byte{0xde, 0xad}, "y txt"))
	f.round()

	// Round 2: older than round 1's newest, and newer.
	f.sample(xID0, 100, 100, 2*s+s/2, 0, xRaw(tb, x, 100, 0, math.MinInt64, "", "tab\there", 0))
	f.sample(xID1, 400, 401, 2*s+6*s/10, 1, xRaw(tb, x, 401, 14, 14, "c14", "old", 14))
	f.sample(xID1, 100, 101, 3*s+2*s/10, 1, xRaw(tb, x, 101, 7, -7, "c7", "seven", 7))
	odd(func() {
		f.sample(goneID12, 300, 300, 2*s+7*s/10, 12, rawRecord(goneID, 300, []byte{0xaa, 0xbb, 0xcc, 0xdd}))
	})
	f.sample(xID12, 300, 300, 2*s+75*s/100, 12, xRaw(tb, x, 300, 16, 16, "c16", "naïve", 16))
	f.comm(yID0, 500, 401, "new-task", 3*s+s/10, 0)
	f.sample(yID0, 500, 401, 3*s+15*s/100, 0, yRaw(tb, y, 401, 15, 15, 15, []byte("abcdef"), nil, "new"))
	f.check(f.w.WriteLost(xID0, 7, nil))
	if forPerf {
		// A thread made during the recording: perf names it after its
		// parent, and so must report.
		f.check(f.w.WriteFork(100, 100, 102, 100, 3*s+16*s/100, &perfdata.Sample{ID: xID0, PID: 100, TID: 102, Time: 3*s + 16*s/100}))
		f.sample(xID0, 100, 102, 3*s+17*s/100, 0, xRaw(tb, x, 102, 17, 17, "c17", "forked", 17))
	}
	f.round()

	// Round 3: a rename, a truncated record, a sample of id 0.
	f.comm(xID1, 100, 101, "renamed", 3*s+s/2, 1)
	f.sample(xID1, 100, 101, 4*s, 1, xRaw(tb, x, 101, 8, 8, "c8", "after rename", 8))
	f.sample(yID0, 100, 100, 3*s+3*s/10, 0, yRaw(tb, y, 100, 1, 1, 1, make([]byte, 6), nil, ""))
	odd(func() {
		f.sample(xID0, 100, 100, 3*s+4*s/10, 0, xRaw(tb, x, 100, 10, 10, "c10", "cut", 10)[:12])
		f.check(f.w.WriteRecord(sampleRecord(0, 100, 100, 3*s+45*s/100, 0, xRaw(tb, x, 100, 11, 11, "c11", "id zero", 11))))
	})
	f.check(f.w.WriteLost(yID1, 3, &perfdata.Sample{ID: yID1, PID: 200, TID: 201, Time: 3*s + 46*s/100, CPU: 1}))
	f.round()

	// Round 4, cut short: no FINISHED_ROUND after it.
	f.sample(xID0, 100, 100, 12345*s+678_901_234, 0, xRaw(tb, x, 100, 12, -12, trickyC, trickyMsg, 12))
	odd(func() {
		r13 := xRaw(tb, x, 101, 13, 13, "c13", "too long", 13)
		ne.PutUint32(r13[28:], 255<<16) // msg: 255 bytes right after its loc word
		f.sample(xID1, 100, 101, 5*s, 1, r13)
	})
	return f.close()
}
