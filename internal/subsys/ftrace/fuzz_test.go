package ftrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzRing runs a sequence of operations decoded from the input on a Ring
// — writes of every size on two CPUs with time gaps around 2^27 ns and
// backwards, consumes, trace iterations, trace_pipe_raw reads, resets,
// resizes, tracing_on — and checks the accounting after each: the trace
// shows, per CPU and in write order, records that were written and not
// consumed, byte for byte, as many as entries-in-buffer says, and every
// record written since the last reset is in the buffer, consumed, or
// counted as an overrun.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 0, 10, 1, 0, 1, 200, 2, 4, 5, 6, 9, 0})
	f.Add(bytes.Repeat([]byte{0, 0, 40, 1}, 200))
	f.Add(append(bytes.Repeat([]byte{1, 1, 255, 3}, 50), 4, 4, 5, 7, 2, 5, 9, 1, 5))
	f.Add([]byte{7, 0, 0, 0, 255, 0, 2, 0, 40, 4, 0, 5, 5, 6, 8, 0, 0, 10, 0, 8, 0, 1, 10, 0, 5})
	f.Fuzz(runFuzzRing)
}

func runFuzzRing(t *testing.T, ops []byte) {
	const ncpu = 2
	m := newModel(t, ncpu)
	for i := 0; i < len(ops); {
		next := func() byte {
			if i >= len(ops) {
				return 0
			}
			i++
			return ops[i-1]
		}
		switch op := next() % 10; op {
		case 0, 1, 2, 3:
			cpu := int(next()) % ncpu
			size := 4 + int(next())*16 + int(op)
			m.write(cpu, size, next())
		case 4:
			m.consume(int(next())%(ncpu+1) - 1)
		case 5:
			m.check()
		case 6:
			m.r.Reset()
			m.reset()
		case 7:
			kb := 1 + int(next())%24
			if err := m.r.Resize(kb); err != nil {
				t.Fatal(err)
			}
		case 8:
			m.r.SetTracingOn(!m.r.TracingOn())
		case 9:
			m.raw(int(next()) % ncpu)
		}
	}
	m.check()
}

// model is what a fuzzed Ring must agree with.
type model struct {
	t         *testing.T
	r         *Ring
	w         *writer
	ts        []uint64
	backwards bool
	records   map[uint32][]byte // every accepted record by sequence number
	times     map[uint32]uint64
	written   [][]uint32 // per CPU, since the last reset
	consumed  []map[uint32]bool
	lastTaken []int64 // per CPU, the last sequence number consumed
}

func newModel(t *testing.T, ncpu int) *model {
	m := &model{t: t, r: New(Config{NCPU: ncpu, BufferKB: 8}), w: newWriter(t),
		ts: make([]uint64, ncpu), records: map[uint32][]byte{}, times: map[uint32]uint64{}}
	m.reset()
	return m
}

func (m *model) reset() {
	n := m.r.NumCPU()
	m.written = make([][]uint32, n)
	m.consumed = make([]map[uint32]bool, n)
	m.lastTaken = make([]int64, n)
	for i := range n {
		m.consumed[i] = map[uint32]bool{}
		m.lastTaken[i] = -1
	}
}

func (m *model) write(cpu, size int, gap byte) {
	switch gap % 6 {
	case 0:
	case 1:
		m.ts[cpu] += uint64(gap)
	case 2:
		m.ts[cpu] += 1<<27 - 1
	case 3:
		m.ts[cpu] += 1 << 27
	case 4:
		m.ts[cpu] += 1 << 40
	case 5:
		if m.ts[cpu] > 1000 {
			m.ts[cpu] -= 1000
			m.backwards = true
		}
	}
	e := m.w.entry(cpu, m.ts[cpu], size)
	seq := seqOf(e)
	want := m.r.TracingOn() && len(e.Record) <= MaxRecordSize
	if got := m.r.Write(e); got != want {
		m.t.Fatalf("Write of %d bytes with tracing %v: %v", len(e.Record), m.r.TracingOn(), got)
	}
	if want {
		m.records[seq] = e.Record
		m.times[seq] = e.TS
		m.written[cpu] = append(m.written[cpu], seq)
	}
}

func (m *model) took(e *Entry) {
	seq := seqOf(e)
	rec, ok := m.records[seq]
	if !ok || !bytes.Equal(rec, e.Record) {
		m.t.Fatalf("consumed record %d: %x, written %x", seq, e.Record, rec)
	}
	if m.consumed[e.CPU][seq] {
		m.t.Fatalf("record %d consumed twice", seq)
	}
	if int64(seq) <= m.lastTaken[e.CPU] {
		m.t.Fatalf("cpu %d: record %d consumed after %d", e.CPU, seq, m.lastTaken[e.CPU])
	}
	if !m.backwards && e.TS != m.times[seq] {
		m.t.Fatalf("record %d: time %d, written at %d", seq, e.TS, m.times[seq])
	}
	m.lastTaken[e.CPU] = int64(seq)
	m.consumed[e.CPU][seq] = true
}

func (m *model) consume(cpu int) {
	var e Entry
	if _, ok := m.r.Consume(&e, cpu); ok {
		if cpu >= 0 && e.CPU != cpu {
			m.t.Fatalf("Consume(%d) returned a record of cpu %d", cpu, e.CPU)
		}
		m.took(&e)
	}
}

func (m *model) raw(cpu int) {
	b, ok := m.r.ReadRawPage(nil, cpu)
	if !ok {
		return
	}
	if len(b) != PageSize {
		m.t.Fatalf("raw page of %d bytes", len(b))
	}
	p := parseRawPage(m.t, b)
	for _, ev := range p.events {
		if len(ev.data) < 12 {
			m.t.Fatalf("raw event of %d bytes", len(ev.data))
		}
		seq := binary.NativeEndian.Uint32(ev.data[8:])
		rec := m.records[seq]
		if len(ev.data) < len(rec) {
			m.t.Fatalf("raw record %d: %d bytes, written %d", seq, len(ev.data), len(rec))
		}
		e := Entry{CPU: cpu, TS: ev.ts, Record: ev.data[:len(rec)]}
		m.took(&e)
	}
}

func (m *model) check() {
	in, written := m.r.Entries()
	var shown uint64
	it := m.r.NewIter(-1)
	defer it.Close()
	last := make([]int64, m.r.NumCPU())
	for i := range last {
		last[i] = -1
	}
	inBuf := make([]map[uint32]bool, m.r.NumCPU())
	for i := range inBuf {
		inBuf[i] = map[uint32]bool{}
	}
	var e Entry
	for {
		marks, ok := it.Next(&e)
		if !ok {
			break
		}
		if marks.Lost != 0 {
			m.t.Fatalf("lost events with no writer running")
		}
		shown++
		seq := seqOf(&e)
		if rec := m.records[seq]; !bytes.Equal(rec, e.Record) {
			m.t.Fatalf("trace shows record %d as %x, written %x", seq, e.Record, rec)
		}
		if m.consumed[e.CPU][seq] {
			m.t.Fatalf("trace shows consumed record %d", seq)
		}
		if int64(seq) <= last[e.CPU] {
			m.t.Fatalf("cpu %d: trace shows %d after %d", e.CPU, seq, last[e.CPU])
		}
		if !m.backwards && e.TS != m.times[seq] {
			m.t.Fatalf("record %d: time %d, written at %d", seq, e.TS, m.times[seq])
		}
		last[e.CPU] = int64(seq)
		inBuf[e.CPU][seq] = true
	}
	if shown != in {
		m.t.Fatalf("trace shows %d records, entries-in-buffer %d", shown, in)
	}
	var over uint64
	for cpu, ws := range m.written {
		for _, seq := range ws {
			if !inBuf[cpu][seq] && !m.consumed[cpu][seq] {
				over++
			}
		}
	}
	if got := m.r.Overruns(); got != over || written != in+over {
		m.t.Fatalf("overruns %d, entries-written %d; the records lost are %d of %d in buffer", got, written, over, in)
	}
}

// FuzzParseCPUMask: what tracing_cpumask takes, for any number of CPUs,
// either fails with an errno or is a mask that prints as a text that
// parses back to it.
func FuzzParseCPUMask(f *testing.F) {
	for _, seed := range []string{"3", "1\n", "ff,ffffffff", ",2\n", "000000002", "g", "", "1,1", " 0f \t", "1\x00ff"} {
		f.Add(seed, 2)
		f.Add(seed, 40)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = 1 + (n%300+300)%300
		mask, err := ParseCPUMask([]byte(text), n)
		if err != nil {
			var errno unix.Errno
			if !errors.As(err, &errno) {
				t.Fatalf("ParseCPUMask(%q, %d): %v wraps no errno", text, n, err)
			}
			return
		}
		if len(mask) != n {
			t.Fatalf("ParseCPUMask(%q, %d): %d CPUs", text, n, len(mask))
		}
		printed := AppendCPUMask(nil, mask)
		again, err := ParseCPUMask(printed, n)
		if err != nil || !slices.Equal(again, mask) {
			t.Fatalf("ParseCPUMask(%q, %d) printed %q, which parses to %v, %v", text, n, printed, again, err)
		}
	})
}
