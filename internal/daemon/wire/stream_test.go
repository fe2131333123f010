package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/perfdata"
)

// streamAttrs are the attrs of two events as a reader of session streams
// writes them: type ids 7 and 300.
func streamAttrs() []perfdata.Attr {
	var out []perfdata.Attr
	for _, typ := range []int{7, 300} {
		out = append(out, perfdata.Attr{
			Name: "user_events:e" + string(rune('a'+typ%26)), IDs: []uint64{SampleID(typ)},
			Type: 2 /* PERF_TYPE_TRACEPOINT */, Config: uint64(typ), SamplePeriod: 1,
			SampleType: StreamSampleType, Flags: perfdata.AttrSampleIDAll,
		})
	}
	return out
}

// writeFile writes a perf.data file of streamAttrs whose data section is
// what records writes there, and returns its bytes.
func writeFile(t *testing.T, name string, records func(w *perfdata.Writer)) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := perfdata.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range streamAttrs() {
		if _, err := w.AddAttr(a); err != nil {
			t.Fatal(err)
		}
	}
	records(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamRecords are the records of the round trip: samples of both events
// with raw records of every length modulo 8, a thread's name, a loss.
type streamRecord struct {
	kind     perfdata.RecordType
	typ      int
	pid, tid uint32
	time     uint64
	cpu      uint32
	raw      []byte
	name     string
	lost     uint64
}

func roundTripRecords() []streamRecord {
	var recs []streamRecord
	recs = append(recs, streamRecord{kind: perfdata.RecordComm, typ: 7, pid: 100, tid: 101, time: 999, cpu: 1, name: "a-very-long-thread-name"})
	for i := range 16 {
		raw := make([]byte, 8+i)
		for j := range raw {
			raw[j] = byte(i*16 + j)
		}
		typ := 7
		if i%3 == 0 {
			typ = 300
		}
		recs = append(recs, streamRecord{kind: perfdata.RecordSample, typ: typ, pid: 100, tid: 101, time: 1000 + uint64(i), cpu: uint32(i % 2), raw: raw})
		if i == 9 {
			recs = append(recs, streamRecord{kind: perfdata.RecordLost, typ: 300, pid: 100, tid: 102, time: 1009, cpu: 1, lost: 42})
			recs = append(recs, streamRecord{kind: perfdata.RecordComm, typ: 300, pid: 100, tid: 102, time: 1010, cpu: 0, name: "x"})
		}
	}
	return recs
}

// put appends r laid out by this package.
func (r *streamRecord) put(b []byte) []byte {
	var n int
	switch r.kind {
	case perfdata.RecordSample:
		n = SampleSize(len(r.raw))
	case perfdata.RecordLost:
		n = LostSize
	case perfdata.RecordComm:
		n = CommSize(r.name)
	}
	// Garbage where the record goes: every byte must be written.
	at := len(b)
	for range n {
		b = append(b, 0xa5)
	}
	p := b[at:]
	switch r.kind {
	case perfdata.RecordSample:
		copy(p[SampleHeadSize:], r.raw)
		PutSample(p, SampleID(r.typ), r.pid, r.tid, r.time, r.cpu, len(r.raw))
	case perfdata.RecordLost:
		PutLost(p, SampleID(r.typ), r.lost, r.pid, r.tid, r.time, r.cpu)
	case perfdata.RecordComm:
		PutComm(p, r.pid, r.tid, r.name, SampleID(r.typ), r.time, r.cpu)
	}
	return b
}

// TestStreamRecordsArePerfdatas: the records this package lays out are,
// byte for byte, those perfdata.Writer writes for the same samples, losses
// and names — through a session stream and back, walked by their headers
// as a reader that writes them as they lie would — and perfdata's Reader
// reads them back as written.
func TestStreamRecordsArePerfdatas(t *testing.T) {
	if StreamSampleType != perfdata.SampleIdentifier|perfdata.SampleTID|perfdata.SampleTime|perfdata.SampleCPU|perfdata.SampleRaw ||
		recordSample != perfdata.RecordSample || recordLost != perfdata.RecordLost || recordComm != perfdata.RecordComm {
		t.Fatal("the numbers of perf_event.h here are not perfdata's")
	}
	recs := roundTripRecords()
	want := writeFile(t, "perfdata.data", func(w *perfdata.Writer) {
		for _, r := range recs {
			tr := &perfdata.Sample{ID: SampleID(r.typ), PID: r.pid, TID: r.tid, Time: r.time, CPU: r.cpu}
			var err error
			switch r.kind {
			case perfdata.RecordSample:
				s := *tr
				s.Raw = r.raw
				err = w.WriteSample(&s)
			case perfdata.RecordLost:
				err = w.WriteLost(SampleID(r.typ), r.lost, tr)
			case perfdata.RecordComm:
				// A COMM record's name is at most TASK_COMM_LEN-1 bytes.
				err = w.WriteComm(r.pid, r.tid, r.name[:min(len(r.name), 15)], tr)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})

	// Through a stream: written there, taken as it lies.
	ss, err := shmring.CreateStreamSet(1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	st, err := shmring.AttachStreams(ss.Fd(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sw := ss.Writer(0)
	for _, r := range recs {
		b := r.put(nil)
		room := sw.Reserve(len(b))
		if room == nil {
			t.Fatal("the stream is full")
		}
		r.put(room[:0])
		sw.Commit(len(b))
	}
	sw.Publish()
	data := append([]byte(nil), st.Reader(0).Available()...)
	got := writeFile(t, "stream.data", func(w *perfdata.Writer) {
		for b := data; len(b) > 0; {
			n := int(binary.NativeEndian.Uint16(b[6:]))
			if err := w.WriteRecord(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	})
	if !bytes.Equal(got, want) {
		t.Fatalf("the stream's records differ from perfdata.Writer's:\n%x\n%x", got, want)
	}

	// Read back.
	rd, err := perfdata.NewReader(bytes.NewReader(got), int64(len(got)))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for i, r := range recs {
		rec, err := rd.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.Type != r.kind {
			t.Fatalf("record %d: type %v, want %v", i, rec.Type, r.kind)
		}
		s := rec.Sample
		if s.ID != SampleID(r.typ) || s.PID != r.pid || s.TID != r.tid || s.Time != r.time || s.CPU != r.cpu {
			t.Fatalf("record %d: sample/trailer %+v, want %+v", i, s, r)
		}
		switch r.kind {
		case perfdata.RecordSample:
			if !bytes.Equal(s.Raw[:len(r.raw)], r.raw) || len(s.Raw)%8 != 4 {
				t.Fatalf("record %d: raw %x, want %x padded", i, s.Raw, r.raw)
			}
		case perfdata.RecordLost:
			if rec.ID != SampleID(r.typ) || rec.Lost != r.lost {
				t.Fatalf("record %d: lost %d of %d, want %d of %d", i, rec.Lost, rec.ID, r.lost, SampleID(r.typ))
			}
		case perfdata.RecordComm:
			if want := r.name[:min(len(r.name), 15)]; string(rec.Comm) != want || rec.PID != r.pid || rec.TID != r.tid {
				t.Fatalf("record %d: comm %q of %d/%d, want %q", i, rec.Comm, rec.PID, rec.TID, want)
			}
		}
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}
}
