package perfdata

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

// readAll reads every record of r.
func readAll(tb testing.TB, r *Reader) []testRec {
	tb.Helper()
	var recs []testRec
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			tb.Fatalf("record %d: %v", len(recs), err)
		}
		recs = append(recs, toTestRec(&rec))
		// The record's slices alias the buffer: copy them.
		last := &recs[len(recs)-1]
		last.Sample.Raw = bytes.Clone(last.Sample.Raw)
		last.Data = bytes.Clone(last.Data)
	}
}

var attrOpts = cmpopts.IgnoreFields(Attr{}, "Size")

func TestRoundTrip(t *testing.T) {
	tf := writeTestFile(t, t.TempDir(), 40, true)
	r, err := Open(tf.path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if diff := cmp.Diff(tf.attrs, r.Attrs(), attrOpts); diff != "" {
		t.Errorf("attrs (-want +got):\n%s", diff)
	}
	for _, a := range r.Attrs() {
		if a.Size != AttrSizeVer7 {
			t.Errorf("attr %s: size %d, want %d", a.Name, a.Size, AttrSizeVer7)
		}
	}
	if diff := cmp.Diff(tf.meta, r.Meta()); diff != "" {
		t.Errorf("meta (-want +got):\n%s", diff)
	}
	wantTD := *tf.tracing
	wantTD.Version, wantTD.LongSize, wantTD.PageSize = "0.6", 8, os.Getpagesize()
	if diff := cmp.Diff(&wantTD, r.TracingData(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("tracing data (-want +got):\n%s", diff)
	}
	got := readAll(t, r)
	if diff := cmp.Diff(tf.records, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	wantFeatures := []Feature{FeatureTracingData, FeatureHostname, FeatureOSRelease, FeatureVersion,
		FeatureArch, FeatureNrCPUs, FeatureCmdline, FeatureEventDesc}
	if diff := cmp.Diff(wantFeatures, r.Features()); diff != "" {
		t.Errorf("features (-want +got):\n%s", diff)
	}
	// After the end, Next keeps saying so.
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v, want io.EOF", err)
	}
}

// memFile is an io.WriteSeeker in memory.
type memFile struct {
	b   []byte
	off int64
}

func (m *memFile) Write(p []byte) (int, error) {
	if end := m.off + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	copy(m.b[m.off:], p)
	m.off += int64(len(p))
	return len(p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		m.off = off
	case io.SeekCurrent:
		m.off += off
	case io.SeekEnd:
		m.off = int64(len(m.b)) + off
	}
	return m.off, nil
}

func openBytes(tb testing.TB, b []byte) *Reader {
	tb.Helper()
	r, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestRawPadding checks that raw data of every length mod 8 is padded with
// zeros so that its size word and it end on 8 bytes, and the size counts
// the padding, as the kernel writes it.
func TestRawPadding(t *testing.T) {
	var m memFile
	w, err := NewWriter(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(Attr{Type: TypeTracepoint, SampleType: SampleTime | SampleRaw, Flags: AttrSampleIDAll}); err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for n := range 20 {
		raw := bytes.Repeat([]byte{0xaa}, n)
		if err := w.WriteSample(&Sample{Time: uint64(n), Raw: raw}); err != nil {
			t.Fatal(err)
		}
		want = append(want, padRaw(raw))
		if len(want[n])%8 != 4 {
			t.Fatalf("padRaw(%d bytes) = %d bytes", n, len(want[n]))
		}
	}
	wantSize := headerSize
	for _, raw := range want {
		wantSize += 8 + 8 + 4 + len(raw)
	}
	if w.Size() != int64(wantSize) {
		t.Errorf("Size = %d, want %d", w.Size(), wantSize)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openBytes(t, m.b)
	var got [][]byte
	for _, rec := range readAll(t, r) {
		got = append(got, rec.Sample.Raw)
		if int(rec.Sample.Time) != len(got)-1 {
			t.Errorf("sample %d: time %d", len(got)-1, rec.Sample.Time)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("raw (-want +got):\n%s", diff)
	}
}

// TestNoSampleIDAll: without sample_id_all, COMM and LOST have no trailer
// and a single attr's samples need no id.
func TestNoSampleIDAll(t *testing.T) {
	var m memFile
	w, err := NewWriter(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(Attr{Name: "a:b", Type: TypeTracepoint, SampleType: SampleTID | SampleTime | SampleCPU | SampleRaw}); err != nil {
		t.Fatal(err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(w.WriteComm(1, 2, "a-very-long-thread-name", &Sample{Time: 99}))
	check(w.WriteSample(&Sample{ID: 12345, PID: 1, TID: 2, Time: 3, CPU: 4, Raw: []byte("abcd")}))
	check(w.WriteLost(5, 6, nil))
	check(w.Close())
	want := []testRec{
		{Type: RecordComm, PID: 1, TID: 2, Comm: "a-very-long-thread-name"},
		{Type: RecordSample, Attr: "a:b", Sample: Sample{PID: 1, TID: 2, Time: 3, CPU: 4, Raw: []byte("abcd")}},
		{Type: RecordLost, ID: 5, Lost: 6},
	}
	got := readAll(t, openBytes(t, m.b))
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestWriteRecord passes records through: unknown kernel and user types.
func TestWriteRecord(t *testing.T) {
	var m memFile
	w, err := NewWriter(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(testAttr()); err != nil {
		t.Fatal(err)
	}
	rec := func(typ uint32, misc uint16, body ...uint64) []byte {
		b := ne.AppendUint32(nil, typ)
		b = ne.AppendUint16(b, misc)
		b = ne.AppendUint16(b, uint16(8+8*len(body)))
		for _, v := range body {
			b = ne.AppendUint64(b, v)
		}
		return b
	}
	// A kernel type perfdata does not know, with a trailer of the test
	// attr (TID, TIME, CPU, IDENTIFIER), and a type of perf's own.
	kernel := rec(40, 3, 0xdead, 7|8<<32, 1234, 5, testIDBase+1)
	user := rec(200, 0, 1, 2)
	for _, b := range [][]byte{kernel, user} {
		if err := w.WriteRecord(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range [][]byte{nil, kernel[:7], kernel[:12], rec(1, 0, make([]uint64, 8200)...)} {
		if err := w.WriteRecord(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("WriteRecord(%d bytes) = %v, want EINVAL", len(bad), err)
		}
	}
	wrongSize := bytes.Clone(user)
	wrongSize[6] = 16
	if err := w.WriteRecord(wrongSize); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "header says 16") {
		t.Errorf("WriteRecord with a wrong size = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := []testRec{
		{Type: 40, Misc: 3, Attr: "user_events:test", Sample: Sample{Misc: 3, PID: 7, TID: 8, Time: 1234, CPU: 5, ID: testIDBase + 1}, Data: kernel[8:]},
		{Type: 200, Data: user[8:]},
	}
	if diff := cmp.Diff(want, readAll(t, openBytes(t, m.b))); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestWriteRecords: runs of records written as they are give the file
// WriteRecord gives them one by one — short runs through the buffer, long
// ones straight from the caller's bytes — and a run whose headers do not
// add up is refused whole, EINVAL, the file unchanged.
func TestWriteRecords(t *testing.T) {
	rec := func(i int) []byte {
		n := 8 + 8*(i%7)
		b := ne.AppendUint32(nil, 200+uint32(i%3))
		b = ne.AppendUint16(b, 0)
		b = ne.AppendUint16(b, uint16(n))
		for len(b) < n {
			b = append(b, byte(i))
		}
		return b
	}
	var run []byte
	for i := range 40000 { // longer than a sixteenth of the buffer
		run = append(run, rec(i)...)
	}
	var short []byte
	for i := range 10 {
		short = append(short, rec(i)...)
	}
	var one, many memFile
	for _, m := range []*memFile{&one, &many} {
		w, err := NewWriter(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.AddAttr(testAttr()); err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{short, run, short} {
			if m == &many {
				if err := w.WriteRecords(b); err != nil {
					t.Fatal(err)
				}
				continue
			}
			for r := b; len(r) > 0; {
				n := int(ne.Uint16(r[6:]))
				if err := w.WriteRecord(r[:n]); err != nil {
					t.Fatal(err)
				}
				r = r[n:]
			}
		}
		for _, bad := range [][]byte{run[:len(run)-8], append(bytes.Clone(short), 1, 2, 3), {0, 0, 0, 0, 0, 0, 12, 0, 1, 2, 3, 4}} {
			if err := w.WriteRecords(bad); !errors.Is(err, unix.EINVAL) {
				t.Errorf("WriteRecords(%d bytes whose headers do not add up) = %v, want EINVAL", len(bad), err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(one.b, many.b) {
		t.Fatal("WriteRecords wrote another file than WriteRecord record by record")
	}
}

func TestWriterErrors(t *testing.T) {
	newW := func(t *testing.T, attrs ...Attr) *Writer {
		t.Helper()
		w, err := NewWriter(&memFile{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attrs {
			if _, err := w.AddAttr(a); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	noID := Attr{Name: "a:noid", SampleType: SampleTime | SampleRaw, Flags: AttrSampleIDAll}
	withID := testAttr()
	tests := []struct {
		name  string
		do    func(t *testing.T) error
		errno error
		msg   string
	}{
		{"sample before any attr", func(t *testing.T) error { return newW(t).WriteSample(&Sample{}) }, unix.EINVAL, "no attr added yet"},
		{"comm before any attr", func(t *testing.T) error { return newW(t).WriteComm(1, 1, "x", nil) }, unix.EINVAL, "no attr added yet"},
		{"second attr without ids", func(t *testing.T) error {
			_, err := newW(t, noID).AddAttr(withID)
			return err
		}, unix.EINVAL, "has no sample id"},
		{"second attr with the id elsewhere", func(t *testing.T) error {
			a := withID
			a.SampleType = SampleID | SampleIP | SampleRaw
			_, err := newW(t, withID).AddAttr(a)
			return err
		}, unix.EINVAL, "not where attr 0's is"},
		{"second attr without sample_id_all", func(t *testing.T) error {
			a := withID
			a.Flags = 0
			a.IDs = nil
			_, err := newW(t, withID).AddAttr(a)
			return err
		}, unix.EINVAL, "sample_id_all differs"},
		{"duplicate id", func(t *testing.T) error {
			a := otherAttr()
			a.IDs = []uint64{testIDBase}
			_, err := newW(t, withID).AddAttr(a)
			return err
		}, unix.EEXIST, "already attr 0's"},
		{"id twice in one attr", func(t *testing.T) error {
			a := withID
			a.IDs = []uint64{1, 1}
			_, err := newW(t).AddAttr(a)
			return err
		}, unix.EEXIST, "given twice"},
		{"AddIDs of a taken id", func(t *testing.T) error { return newW(t, withID, otherAttr()).AddIDs(1, testIDBase) }, unix.EEXIST, "already attr 0's"},
		{"AddIDs of no attr", func(t *testing.T) error { return newW(t, withID).AddIDs(3, 9) }, unix.EINVAL, "no attr 3"},
		{"sample of an unknown id", func(t *testing.T) error {
			return newW(t, withID, otherAttr()).WriteSample(&Sample{ID: 999})
		}, unix.EINVAL, "sample id 999 belongs to no attr"},
		{"sample_type the writer cannot encode", func(t *testing.T) error {
			a := withID
			a.SampleType |= SampleCallchain
			return newW(t, a).WriteSample(&Sample{})
		}, unix.EINVAL, "cannot encode sample_type CALLCHAIN"},
		{"raw too large", func(t *testing.T) error {
			return newW(t, withID).WriteSample(&Sample{Raw: make([]byte, 70000)})
		}, unix.E2BIG, "larger than a record can be"},
		{"comm too long", func(t *testing.T) error {
			return newW(t, withID).WriteComm(1, 1, strings.Repeat("x", 70000), nil)
		}, unix.E2BIG, "longer than a record can hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(t)
			if !errors.Is(err, tt.errno) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v, want %v with %q", err, tt.errno, tt.msg)
			}
		})
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct {
	memFile
	n int
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(f.b)+len(p) > f.n {
		return 0, unix.ENOSPC
	}
	return f.memFile.Write(p)
}

func TestWriterStickyError(t *testing.T) {
	f := &failWriter{n: headerSize}
	w, err := NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(testAttr()); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 60000)
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		werr = w.WriteSample(&Sample{ID: testIDBase, Raw: raw})
	}
	if !errors.Is(werr, unix.ENOSPC) {
		t.Fatalf("WriteSample on a full disk = %v, want ENOSPC", werr)
	}
	if err := w.WriteFinishedRound(); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("after the error: %v", err)
	}
	if err := w.Close(); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("Close = %v, want ENOSPC", err)
	}
	if err := w.Close(); err == nil {
		t.Error("second Close succeeded")
	}
	if err := w.WriteFinishedRound(); err == nil {
		t.Error("write after Close succeeded")
	}
}

// TestUnfinished: a file whose writer did not Close says so, in perf's words.
func TestUnfinished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unfinished.data")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(testAttr()); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFinishedRound(); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "not finished") {
		t.Errorf("Open of an unfinished file = %v", err)
	}
	w.Close()
}

// buildFile lays out a file by hand: header, data, then attrs of attrSize
// bytes (the struct padded with zeros or cut), each with its ids.
func buildFile(attrSize int, attrs []Attr, records ...[]byte) []byte {
	var data []byte
	for _, r := range records {
		data = append(data, r...)
	}
	b := appendHeader(nil, 0, 0, 0, 0, 0, nil)
	b = append(b, data...)
	idOffs := make([]int, len(attrs))
	for i, a := range attrs {
		idOffs[i] = len(b)
		for _, id := range a.IDs {
			b = ne.AppendUint64(b, id)
		}
	}
	attrsOff := len(b)
	for i, a := range attrs {
		s := appendAttr(nil, &a, AttrSizeVer8)
		s = append(s, make([]byte, max(0, attrSize-len(s)))...)[:attrSize]
		ne.PutUint32(s[4:], uint32(attrSize))
		if attrSize == AttrSizeVer0 {
			ne.PutUint32(s[4:], 0) // ABI0 files have size 0
		}
		b = append(b, s...)
		b = ne.AppendUint64(b, uint64(idOffs[i]))
		b = ne.AppendUint64(b, uint64(8*len(a.IDs)))
	}
	h := appendHeader(nil, int64(attrSize+16), int64(attrsOff), int64(len(b)-attrsOff), headerSize, int64(len(data)), nil)
	copy(b, h)
	return b
}

func sampleRecord(body ...uint64) []byte {
	b := ne.AppendUint32(nil, RecordSample)
	b = ne.AppendUint16(b, MiscKernel)
	b = ne.AppendUint16(b, uint16(8+8*len(body)))
	for _, v := range body {
		b = ne.AppendUint64(b, v)
	}
	return b
}

// TestAttrSizes reads attrs of every size perf has written, and larger.
func TestAttrSizes(t *testing.T) {
	a := Attr{Type: TypeSoftware, Config: 9, SamplePeriod: 1, SampleType: SampleIdentifier | SampleTime, Flags: AttrSampleIDAll, IDs: []uint64{11, 12}}
	b := Attr{Type: TypeTracepoint, Config: 3, SamplePeriod: 1, SampleType: SampleIdentifier | SampleTime | SampleCPU, Flags: AttrSampleIDAll, IDs: []uint64{13}}
	for _, size := range []int{AttrSizeVer0, 72, 80, 96, 104, 112, 120, AttrSizeVer7, AttrSizeVer8, 160} {
		file := buildFile(size, []Attr{a, b}, sampleRecord(12, 1000), sampleRecord(13, 2000, 3))
		r := openBytes(t, file)
		if len(r.Attrs()) != 2 {
			t.Fatalf("size %d: %d attrs", size, len(r.Attrs()))
		}
		want := []Attr{a, b}
		for i := range want {
			want[i].Size = uint32(size)
			if size == AttrSizeVer0 {
				want[i].Size = 0
			}
		}
		if diff := cmp.Diff(want, r.Attrs()); diff != "" {
			t.Errorf("size %d: attrs (-want +got):\n%s", size, diff)
		}
		wantRecs := []testRec{
			{Type: RecordSample, Misc: MiscKernel, Attr: "", Sample: Sample{Misc: MiscKernel, ID: 12, Time: 1000}},
			{Type: RecordSample, Misc: MiscKernel, Attr: "", Sample: Sample{Misc: MiscKernel, ID: 13, Time: 2000, CPU: 3}},
		}
		got := readAll(t, r)
		if diff := cmp.Diff(wantRecs, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("size %d: records (-want +got):\n%s", size, diff)
		}
	}
	// The writer writes VER8 when Config3 needs it.
	var m memFile
	w, _ := NewWriter(&m)
	c := a
	c.Config3 = 77
	w.AddAttr(c)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openBytes(t, m.b)
	if got := r.Attrs()[0]; got.Size != AttrSizeVer8 || got.Config3 != 77 {
		t.Errorf("attr with Config3: size %d, config3 %d", got.Size, got.Config3)
	}
}

// TestReaderSamples decodes sample layouts the writer does not write:
// READ (one value and group) and CALLCHAIN before RAW, and an id perf
// does not know.
func TestReaderSamples(t *testing.T) {
	one := Attr{Name: "one", SampleType: SampleIdentifier | SampleRead | SampleCallchain | SampleRaw, ReadFormat: FormatTotalTimeEnabled | FormatID, Flags: AttrSampleIDAll, IDs: []uint64{1}}
	group := Attr{Name: "group", SampleType: SampleIdentifier | SampleRead | SampleRaw, ReadFormat: FormatGroup | FormatID | FormatLost, Flags: AttrSampleIDAll, IDs: []uint64{2}}
	raw := func(s string) []uint64 { // u32 size + data, in u64s
		b := ne.AppendUint32(nil, uint32(len(s)))
		b = append(b, s...)
		var v []uint64
		for i := 0; i < len(b); i += 8 {
			var w [8]byte
			copy(w[:], b[i:])
			v = append(v, ne.Uint64(w[:]))
		}
		return v
	}
	rec1 := sampleRecord(append([]uint64{1, 100, 200, 1 /* read: value, enabled, id */, 2, 0xa, 0xb /* callchain */}, raw("abcd")...)...)
	rec2 := sampleRecord(append([]uint64{2, 2, 10, 1, 0, 20, 2, 0 /* group: nr, {value, id, lost} x2 */}, raw("efghijkl0123")...)...)
	rec3 := sampleRecord(999, 1, 2)
	file := buildFile(AttrSizeVer7, []Attr{one, group}, rec1, rec2, rec3)
	got := readAll(t, openBytes(t, file))
	want := []testRec{
		{Type: RecordSample, Misc: MiscKernel, Attr: "one", Sample: Sample{Misc: MiscKernel, ID: 1, Raw: []byte("abcd")}},
		{Type: RecordSample, Misc: MiscKernel, Attr: "group", Sample: Sample{Misc: MiscKernel, ID: 2, Raw: []byte("efghijkl0123")}},
		{Type: RecordSample, Misc: MiscKernel, Sample: Sample{Misc: MiscKernel, ID: 999}},
	}
	// The attrs of buildFile have no names: name them for the comparison.
	for i := range got {
		switch got[i].Sample.ID {
		case 1:
			got[i].Attr = "one"
		case 2:
			got[i].Attr = "group"
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestReaderErrors checks that bad files get an error that says what is
// wrong and where, and that the reader goes on after a bad record.
func TestReaderErrors(t *testing.T) {
	good := buildFile(AttrSizeVer7, []Attr{testAttr()}, sampleRecord(testIDBase, 1, 2, 3, 4, 5))
	patch := func(b []byte, off int, v ...byte) []byte {
		b = bytes.Clone(b)
		copy(b[off:], v)
		return b
	}
	u64 := func(v uint64) []byte { return ne.AppendUint64(nil, v) }
	// A pipe-mode stream whose first record, an attr, is 8 bytes.
	pipe := append(append(u64(magic), u64(16)...), 64, 0, 0, 0, 0, 0, 8, 0)
	tests := []struct {
		name string
		file []byte
		err  error
		msg  string
	}{
		{"empty", nil, io.ErrUnexpectedEOF, "too short for a perf.data header"},
		{"not perf", []byte("hello, world, this is text"), unix.EINVAL, `not a perf.data file: it starts with "hello, w"`},
		{"pipe mode", pipe, unix.EINVAL, "HEADER_ATTR record of 8 bytes"},
		{"other byte order", patch(good, 0, u64(magicSwapped)...), unix.EINVAL, "other byte order"},
		{"version 1", patch(good, 0, []byte("PERFFILE")...), unix.EINVAL, "version 1"},
		{"header size", patch(good, 8, u64(100)...), unix.EINVAL, "header size 100"},
		{"pipe tracing data", append(append(u64(magic), u64(16)...), 66, 0, 0, 0, 0, 0, 16, 0, 0, 1, 0, 0, 0, 0, 0, 0), io.ErrUnexpectedEOF, "tracing data of 256 bytes"},
		{"truncated header", good[:50], io.ErrUnexpectedEOF, "header of 104 bytes"},
		{"data beyond the end", patch(good, 48, u64(1<<40)...), io.ErrUnexpectedEOF, "data section"},
		{"attrs beyond the end", patch(good, 32, u64(1<<62)...), io.ErrUnexpectedEOF, "attrs section"},
		{"overlap", patch(good, 24, u64(headerSize)...), unix.EINVAL, "overlap"},
		{"attr size 0", patch(good, 16, u64(0)...), unix.EINVAL, "not finished"},
		{"attr's size field", patch(good, len(good)-AttrSizeVer7-16+4, 8, 0, 0, 0), unix.EINVAL, "attr 0 has size 8"},
		{"ids beyond the end", patch(good, len(good)-8, u64(1<<50)...), io.ErrUnexpectedEOF, "its ids"},
		{"feature table beyond the end", patch(good, 72, bytes.Repeat([]byte{0xff}, 32)...), io.ErrUnexpectedEOF, "feature table of 4096 bytes goes beyond"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tt.file), int64(len(tt.file)))
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v, want a *FormatError of %v with %q", err, tt.err, tt.msg)
			}
			if err != nil && !strings.Contains(err.Error(), "offset ") {
				t.Errorf("error %q says no offset", err)
			}
		})
	}
}

func TestRecordErrors(t *testing.T) {
	attr := testAttr() // IDENTIFIER|IP|TID|TIME|CPU|PERIOD|RAW: 48 fixed bytes
	short := sampleRecord(testIDBase, 1, 2)
	rawLong := sampleRecord(testIDBase, 1, 2, 3, 4, 5, 1000 /* raw size 1000 */)
	comm := ne.AppendUint32(nil, RecordComm)
	comm = ne.AppendUint16(comm, 0)
	comm = ne.AppendUint16(comm, 16) // pid, tid and no trailer
	comm = ne.AppendUint64(comm, 0)
	good := sampleRecord(testIDBase, 1, 2, 3, 4, 5, 0)
	file := buildFile(AttrSizeVer7, []Attr{attr}, short, rawLong, comm, good)
	r := openBytes(t, file)
	for i, want := range []string{
		"offset 104 (0x68): sample of 24 bytes is shorter than the 48 bytes",
		"offset 192 (0xc0): sample of 56 bytes ends inside its raw data, which starts at byte 48 (attr 0)",
		"offset 200 (0xc8): COMM record of 8 bytes is shorter than its sample_id trailer (32 bytes, attr 0)",
	} {
		_, err := r.Next()
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("record %d: %v, want %q", i, err, want)
		}
	}
	if rec, err := r.Next(); err != nil || rec.Type != RecordSample || rec.Sample.Time != 3 {
		t.Errorf("the record after the bad ones: %+v, %v", rec, err)
	}

	// Framing errors stop the iteration.
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"size 0", make([]byte, 8), "offset 104 (0x68): record size 0 is less than its 8-byte header"},
		{"past the end", good[:40], "a record of 64 bytes goes beyond the end of the data section (40 bytes left)"},
		{"half a header", good[:4], "a record of 8 bytes goes beyond the end of the data section (4 bytes left)"},
	} {
		r := openBytes(t, buildFile(AttrSizeVer7, []Attr{attr}, tt.data))
		for range 2 {
			if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
			}
		}
	}
}

// TestLargeFile crosses the reader's buffer many times, with records
// straddling its end.
func TestLargeFile(t *testing.T) {
	var m memFile
	w, err := NewWriter(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAttr(Attr{SampleType: SampleTime | SampleRaw, Flags: AttrSampleIDAll}); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 1000)
	const n = 5000 // 5 MB
	for i := range n {
		raw[0] = byte(i)
		if err := w.WriteSample(&Sample{Time: uint64(i), Raw: raw[:i%1000]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openBytes(t, m.b)
	for i := range n {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.Sample.Time != uint64(i) || len(rec.Sample.Raw) != (4+i%1000+7)&^7-4 || i%1000 > 0 && rec.Sample.Raw[0] != byte(i) {
			t.Fatalf("record %d: time %d, raw %d bytes", i, rec.Sample.Time, len(rec.Sample.Raw))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last: %v", err)
	}
}

func TestHostMeta(t *testing.T) {
	m := HostMeta(nil)
	if m.Hostname == "" || m.OSRelease == "" || m.Arch == "" || m.NrCPUsOnline == 0 || m.NrCPUsAvail < m.NrCPUsOnline || len(m.Cmdline) == 0 {
		t.Errorf("HostMeta = %+v", m)
	}
	if m := HostMeta([]string{"a", "b"}); !cmp.Equal(m.Cmdline, []string{"a", "b"}) {
		t.Errorf("HostMeta cmdline = %q", m.Cmdline)
	}
}

func TestFindFormat(t *testing.T) {
	ev := testEvent(t)
	td := testTracingData(ev)
	sys, f, ok := td.FindFormat(testTypeID)
	if !ok || sys != "user_events" || FormatName(f) != "test" {
		t.Errorf("FindFormat(%d) = %q, %q, %v", testTypeID, sys, f, ok)
	}
	if _, _, ok := td.FindFormat(123); ok {
		t.Error("FindFormat(123) found a format")
	}
	// An attr without a name is named after its format.
	var m memFile
	w, _ := NewWriter(&m)
	a := testAttr()
	a.Name = ""
	w.AddAttr(a)
	w.SetTracingData(td)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openBytes(t, m.b).Attrs()[0].Name; got != "user_events:test" {
		t.Errorf("name = %q", got)
	}
}

func TestVersionAtLeast06(t *testing.T) {
	for v, want := range map[string]bool{"0.6": true, "0.5": false, "0.6.1": true, "1": true, "": false, "x": false, "0.10": false} {
		if got := versionAtLeast06(v); got != want {
			t.Errorf("versionAtLeast06(%q) = %v, want %v", v, got, want)
		}
	}
}
