package perfdata

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writerBufSize is the data buffer of a Writer: large writes, few syscalls.
const writerBufSize = 1 << 20

// A Writer writes a perf.data file. Records go to the data section as they
// are written, through a buffer; attrs, ids, the Meta and the tracing data
// may be added at any time before Close, which writes them after the data,
// then the header.
//
// The Write methods do not allocate. After the first error every method
// returns it.
type Writer struct {
	ws   io.WriteSeeker
	file *os.File // closed by Close: the Writer made it
	buf  []byte   // data not yet written; its first byte is at file offset off
	off  int64
	err  error // sticky

	attrs []Attr
	info  []attrInfo
	ids   map[uint64]int // sample id → index in attrs

	// the last id looked up and its attr, for runs of samples of one
	// event; lastAttr < 0 when there is none
	lastID   uint64
	lastAttr int

	meta       Meta
	tracing    []byte            // the encoded HEADER_TRACING_DATA, nil when none
	tracepoint map[uint64]string // tracing data id → "system:name"
	clock      *ClockData
}

// attrInfo is what the hot paths need of an attr.
type attrInfo struct {
	sampleType uint64
	fixed      int  // bytes of the one-u64 sample fields
	trailer    int  // bytes of the sample_id trailer
	writable   bool // WriteSample can encode its sample_type
	readFormat uint64
}

func newAttrInfo(a *Attr) attrInfo {
	return attrInfo{
		sampleType: a.SampleType,
		fixed:      8 * u64s(a.SampleType, fixedBits),
		trailer:    8 * u64s(a.SampleType, trailerBits),
		writable:   a.SampleType&^writableBits == 0,
		readFormat: a.ReadFormat,
	}
}

var errClosed = errors.New("perfdata: writer is closed")

// Create creates the file name (truncating it) and returns a Writer to it.
// Close closes the file.
func Create(name string) (*Writer, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.file = f
	return w, nil
}

// NewWriter returns a Writer of a file at the start of ws. Close does not
// close ws. ws should be empty: the Writer does not truncate it.
//
// NewWriter writes a header that says the file is unfinished (perf: "attr
// size field is 0 ... Was the 'perf record' command properly terminated?")
// until Close writes the real one.
func NewWriter(ws io.WriteSeeker) (*Writer, error) {
	if _, err := ws.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("perfdata: seek to the start: %w", err)
	}
	w := &Writer{
		ws:       ws,
		buf:      make([]byte, 0, writerBufSize),
		ids:      make(map[uint64]int),
		lastAttr: -1,
	}
	h := appendHeader(nil, 0, headerSize, 0, headerSize, 0, nil)
	if _, err := ws.Write(h); err != nil {
		return nil, fmt.Errorf("perfdata: write header: %w", err)
	}
	w.off = headerSize
	return w, nil
}

// appendHeader appends a struct perf_file_header.
func appendHeader(b []byte, attrSize, attrsOff, attrsSize, dataOff, dataSize int64, features *[featureBits / 64]uint64) []byte {
	b = ne.AppendUint64(b, magic)
	b = ne.AppendUint64(b, headerSize)
	for _, v := range [...]int64{attrSize, attrsOff, attrsSize, dataOff, dataSize, 0, 0} {
		b = ne.AppendUint64(b, uint64(v))
	}
	for i := range featureBits / 64 {
		var v uint64
		if features != nil {
			v = features[i]
		}
		b = ne.AppendUint64(b, v)
	}
	return b
}

// AddAttr adds an event and returns its index. Its IDs are copied; more can
// be added with AddIDs.
//
// Perf tells the events of a file apart by a sample's id, so when there is
// more than one attr, every attr must have SampleIdentifier (or SampleID at
// the same place) and the same AttrSampleIDAll as the first
// (evlist__valid_sample_type, evlist__valid_sample_id_all).
func (w *Writer) AddAttr(a Attr) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(w.attrs) > 0 {
		first := &w.attrs[0]
		idx := len(w.attrs)
		if a.Flags&AttrSampleIDAll != first.Flags&AttrSampleIDAll {
			return 0, fmt.Errorf("perfdata: attr %d (%s): sample_id_all differs from attr 0's; perf needs it the same in every attr: %w", idx, a.Name, unix.EINVAL)
		}
		fp, fs := idPos(first.SampleType), isPos(first.SampleType)
		if fp < 0 || fs < 0 {
			return 0, fmt.Errorf("perfdata: attr %d (%s): attr 0 (%s) has no sample id (sample_type %s), so samples of two attrs cannot be told apart; give every attr SampleIdentifier: %w",
				idx, a.Name, first.Name, sampleTypeString(first.SampleType), unix.EINVAL)
		}
		if idPos(a.SampleType) != fp || isPos(a.SampleType) != fs {
			return 0, fmt.Errorf("perfdata: attr %d (%s): its sample id is not where attr 0's is (sample_type %s vs %s); give every attr SampleIdentifier: %w",
				idx, a.Name, sampleTypeString(a.SampleType), sampleTypeString(first.SampleType), unix.EINVAL)
		}
	}
	for i, id := range a.IDs {
		if j, ok := w.ids[id]; ok {
			return 0, fmt.Errorf("perfdata: attr %d (%s): sample id %d is already attr %d's: %w", len(w.attrs), a.Name, id, j, unix.EEXIST)
		}
		if dup := indexOf(a.IDs[:i], id); dup >= 0 {
			return 0, fmt.Errorf("perfdata: attr %d (%s): sample id %d given twice: %w", len(w.attrs), a.Name, id, unix.EEXIST)
		}
	}
	a.IDs = append([]uint64(nil), a.IDs...)
	idx := len(w.attrs)
	w.attrs = append(w.attrs, a)
	w.info = append(w.info, newAttrInfo(&a))
	for _, id := range a.IDs {
		w.ids[id] = idx
	}
	w.lastAttr = -1 // id 0 may have been cached as the first attr's
	return idx, nil
}

func indexOf(s []uint64, v uint64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// AddIDs adds sample ids to the attr of index attr (new CPUs or threads of
// an event).
func (w *Writer) AddIDs(attr int, ids ...uint64) error {
	if w.err != nil {
		return w.err
	}
	if attr < 0 || attr >= len(w.attrs) {
		return fmt.Errorf("perfdata: AddIDs: no attr %d (there are %d): %w", attr, len(w.attrs), unix.EINVAL)
	}
	for i, id := range ids {
		if j, ok := w.ids[id]; ok || indexOf(ids[:i], id) >= 0 {
			return fmt.Errorf("perfdata: AddIDs: sample id %d is already attr %d's: %w", id, j, unix.EEXIST)
		}
	}
	a := &w.attrs[attr]
	a.IDs = append(a.IDs, ids...)
	for _, id := range ids {
		w.ids[id] = attr
	}
	w.lastAttr = -1
	return nil
}

// SetMeta sets the host facts written at Close (see Meta); each call
// replaces the last.
func (w *Writer) SetMeta(m Meta) {
	m.Cmdline = append([]string(nil), m.Cmdline...)
	w.meta = m
}

// SetClockData sets the HEADER_CLOCK_DATA written at Close (nil: none):
// the recorder's readings of its events' clock and of the wall clock, for
// a reader to show wall-clock times.
func (w *Writer) SetClockData(c *ClockData) {
	if c != nil {
		c2 := *c
		c = &c2
	}
	w.clock = c
}

// SetTracingData sets the HEADER_TRACING_DATA written at Close, encoding td
// now; each call replaces the last, so a recorder calls it again when a new
// tracepoint appears. nil removes it.
//
// An attr of TypeTracepoint without a Name is named "system:name" after the
// format whose ID is its Config, as perf names it.
func (w *Writer) SetTracingData(td *TracingData) {
	if td == nil {
		w.tracing, w.tracepoint = nil, nil
		return
	}
	w.tracing = appendTracingData(nil, td)
	w.tracepoint = make(map[uint64]string)
	for _, s := range td.Systems {
		for _, f := range s.Formats {
			if id, ok := formatID(f); ok {
				w.tracepoint[id] = s.Name + ":" + FormatName(f)
			}
		}
	}
}

// Size returns the size of the file so far: the header and every record
// written, whether or not it is still in the buffer.
func (w *Writer) Size() int64 { return w.off + int64(len(w.buf)) }

// Flush writes the buffered records to the file.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.ws.Write(w.buf)
	w.off += int64(n)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("perfdata: write data at offset %d: %w", w.off, err)
	}
	return w.err
}

// reserve returns n bytes (n <= maxRecordSize) at the end of the buffer.
func (w *Writer) reserve(n int) ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if len(w.buf)+n > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return nil, err
		}
	}
	l := len(w.buf)
	w.buf = w.buf[:l+n]
	return w.buf[l : l+n], nil
}

func putHeader(p []byte, t RecordType, misc uint16, size int) {
	ne.PutUint32(p, uint32(t))
	ne.PutUint16(p[4:], misc)
	ne.PutUint16(p[6:], uint16(size))
}

// attrOf returns the attr a sample with this id belongs to, as
// evlist__event2evsel finds it: the only attr; else by id, with id 0 (a
// synthesized record) meaning the first.
func (w *Writer) attrOf(id uint64) (int, error) {
	switch len(w.attrs) {
	case 0:
		return 0, fmt.Errorf("perfdata: no attr added yet: %w", unix.EINVAL)
	case 1:
		return 0, nil
	}
	if id == w.lastID && w.lastAttr >= 0 {
		return w.lastAttr, nil
	}
	i, ok := w.ids[id]
	if !ok {
		if id != 0 {
			return 0, fmt.Errorf("perfdata: sample id %d belongs to no attr: %w", id, unix.EINVAL)
		}
	}
	w.lastID, w.lastAttr = id, i
	return i, nil
}

// WriteSample writes a PERF_RECORD_SAMPLE of the fields that the
// sample_type of s.ID's attr selects.
func (w *Writer) WriteSample(s *Sample) error {
	if w.err != nil {
		return w.err
	}
	ai, err := w.attrOf(s.ID)
	if err != nil {
		return err
	}
	info := &w.info[ai]
	st := info.sampleType
	if !info.writable {
		return fmt.Errorf("perfdata: attr %d (%s): WriteSample cannot encode sample_type %s (only %s); use WriteRecord: %w",
			ai, w.attrs[ai].Name, sampleTypeString(st&^writableBits), sampleTypeString(writableBits), unix.EINVAL)
	}
	size := SampleSize(st, len(s.Raw))
	if size > maxRecordSize {
		return fmt.Errorf("perfdata: sample of %d bytes (raw %d) is larger than a record can be (%d): %w", size, len(s.Raw), maxRecordSize, unix.E2BIG)
	}
	p, err := w.reserve(size)
	if err != nil {
		return err
	}
	PutSample(p, st, s)
	return nil
}

// SampleSize is the size of a PERF_RECORD_SAMPLE of sample_type st — of
// the bits WriteSample encodes — whose raw data is n bytes: the header, the
// one-u64 fields, and the raw data's u32 size and bytes padded to 8, as the
// kernel rounds them (round_up(n + sizeof(u32), 8)). It may exceed what a
// record can hold (64 KiB); the caller checks.
func SampleSize(st uint64, n int) int {
	size := recordHeaderSize + 8*u64s(st, fixedBits)
	if st&SampleRaw != 0 {
		size += (4 + n + 7) &^ 7
	}
	return size
}

// PutSample lays out the PERF_RECORD_SAMPLE of s, header included, in p,
// which is SampleSize(st, len(s.Raw)) bytes: the fields st selects (of
// those WriteSample encodes), in the kernel's order (perf_output_sample).
// It is the one encoder of a sample's layout: the Writer's, and that of a
// perf mmap ring uetrace fills itself.
func PutSample(p []byte, st uint64, s *Sample) {
	size := len(p)
	putHeader(p, RecordSample, s.Misc, size)
	i := recordHeaderSize
	if st&SampleIdentifier != 0 {
		ne.PutUint64(p[i:], s.ID)
		i += 8
	}
	if st&SampleIP != 0 {
		ne.PutUint64(p[i:], s.IP)
		i += 8
	}
	if st&SampleTID != 0 {
		ne.PutUint32(p[i:], s.PID)
		ne.PutUint32(p[i+4:], s.TID)
		i += 8
	}
	if st&SampleTime != 0 {
		ne.PutUint64(p[i:], s.Time)
		i += 8
	}
	if st&SampleAddr != 0 {
		ne.PutUint64(p[i:], s.Addr)
		i += 8
	}
	if st&SampleID != 0 {
		ne.PutUint64(p[i:], s.ID)
		i += 8
	}
	if st&SampleStreamID != 0 {
		ne.PutUint64(p[i:], s.StreamID)
		i += 8
	}
	if st&SampleCPU != 0 {
		ne.PutUint32(p[i:], s.CPU)
		ne.PutUint32(p[i+4:], 0)
		i += 8
	}
	if st&SamplePeriod != 0 {
		ne.PutUint64(p[i:], s.Period)
		i += 8
	}
	if st&SampleRaw != 0 {
		ne.PutUint32(p[i:], uint32(size-i-4))
		n := copy(p[i+4:], s.Raw)
		clear(p[i+4+n:])
	}
}

// SampleWritable reports whether PutSample (and WriteSample) encode every
// field of sample_type st, and the bits they encode.
func SampleWritable(st uint64) (ok bool, bits uint64) { return st&^writableBits == 0, writableBits }

// TrailerSize is the size of the sample_id trailer (struct sample_id) that
// non-sample records of an attr with sample_id_all and sample_type st end
// with.
func TrailerSize(st uint64) int { return 8 * u64s(st, trailerBits) }

// PutTrailer writes the sample_id trailer of t into p (TrailerSize(st)
// bytes): TID, Time, ID, StreamID, CPU, and ID again as the identifier, as
// st selects them (__perf_event__output_id_sample).
func PutTrailer(p []byte, st uint64, t *Sample) { putTrailer(p, st, t) }

// PutRecordHeader writes a perf_event_header: type, misc, size.
func PutRecordHeader(p []byte, typ RecordType, misc uint16, size int) { putHeader(p, typ, misc, size) }

// trailerAttr returns the attr whose sample_type lays out the sample_id
// trailer of a non-sample record with this id, or -1 when records have no
// trailer (the first attr has no AttrSampleIDAll).
func (w *Writer) trailerAttr(id uint64) (int, error) {
	if len(w.attrs) == 0 {
		return 0, fmt.Errorf("perfdata: no attr added yet: %w", unix.EINVAL)
	}
	if w.attrs[0].Flags&AttrSampleIDAll == 0 {
		return -1, nil
	}
	return w.attrOf(id)
}

// putTrailer writes the sample_id trailer of t (struct sample_id) into p.
func putTrailer(p []byte, st uint64, t *Sample) {
	i := 0
	if st&SampleTID != 0 {
		ne.PutUint32(p[i:], t.PID)
		ne.PutUint32(p[i+4:], t.TID)
		i += 8
	}
	if st&SampleTime != 0 {
		ne.PutUint64(p[i:], t.Time)
		i += 8
	}
	if st&SampleID != 0 {
		ne.PutUint64(p[i:], t.ID)
		i += 8
	}
	if st&SampleStreamID != 0 {
		ne.PutUint64(p[i:], t.StreamID)
		i += 8
	}
	if st&SampleCPU != 0 {
		ne.PutUint32(p[i:], t.CPU)
		ne.PutUint32(p[i+4:], 0)
		i += 8
	}
	if st&SampleIdentifier != 0 {
		ne.PutUint64(p[i:], t.ID)
	}
}

// WriteComm writes a PERF_RECORD_COMM: thread tid of process pid is named
// comm. When the first attr has AttrSampleIDAll, the record ends with a
// sample_id trailer of trailer's PID, TID, Time, ID, StreamID and CPU (as
// the attr of trailer.ID selects them); a nil trailer is all zeros, which
// is what perf writes for the threads it finds at start (time 0 sorts
// before every sample).
func (w *Writer) WriteComm(pid, tid uint32, comm string, trailer *Sample) error {
	nameSize := (len(comm) + 1 + 7) &^ 7 // the kernel's ALIGN(strlen + 1, 8)
	if recordHeaderSize+8+nameSize > maxRecordSize {
		return fmt.Errorf("perfdata: comm of %d bytes is longer than a record can hold: %w", len(comm), unix.E2BIG)
	}
	p, err := w.reserveKernel(RecordComm, 8+nameSize, trailer)
	if err != nil {
		return err
	}
	ne.PutUint32(p, pid)
	ne.PutUint32(p[4:], tid)
	n := copy(p[8:], comm)
	clear(p[8+n : 8+nameSize])
	return nil
}

// WriteFork writes a PERF_RECORD_FORK: thread tid of process pid was made
// at time by thread ptid of process ppid. The trailer is as for WriteComm.
func (w *Writer) WriteFork(pid, ppid, tid, ptid uint32, time uint64, trailer *Sample) error {
	p, err := w.reserveKernel(RecordFork, 24, trailer)
	if err != nil {
		return err
	}
	ne.PutUint32(p, pid)
	ne.PutUint32(p[4:], ppid)
	ne.PutUint32(p[8:], tid)
	ne.PutUint32(p[12:], ptid)
	ne.PutUint64(p[16:], time)
	return nil
}

// reserveKernel reserves a kernel record of type typ with a body of n
// bytes and the sample_id trailer of trailer (zero when nil) when the
// attrs have sample_id_all; it writes the header and trailer and returns
// the body.
func (w *Writer) reserveKernel(typ RecordType, n int, trailer *Sample) ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	var zero Sample
	if trailer == nil {
		trailer = &zero
	}
	ai, err := w.trailerAttr(trailer.ID)
	if err != nil {
		return nil, err
	}
	size := recordHeaderSize + n
	if ai >= 0 {
		size += w.info[ai].trailer
	}
	p, err := w.reserve(size)
	if err != nil {
		return nil, err
	}
	putHeader(p, typ, 0, size)
	if ai >= 0 {
		putTrailer(p[recordHeaderSize+n:], w.info[ai].sampleType, trailer)
	}
	return p[recordHeaderSize : recordHeaderSize+n], nil
}

// WriteLost writes a PERF_RECORD_LOST: count records of the event instance
// with sample id id were lost. The trailer is as for WriteComm; a nil one
// is zero but for its ID, which is id.
func (w *Writer) WriteLost(id, count uint64, trailer *Sample) error {
	t := Sample{ID: id}
	if trailer != nil {
		t = *trailer
	}
	p, err := w.reserveKernel(RecordLost, 16, &t)
	if err != nil {
		return err
	}
	ne.PutUint64(p, id)
	ne.PutUint64(p[8:], count)
	return nil
}

// WriteFinishedRound writes a PERF_RECORD_FINISHED_ROUND. Perf sorts the
// records between two of them by time before it shows them, so a recorder
// writes one after each pass over its ring buffers: every record before it
// is older than every record after the next one.
func (w *Writer) WriteFinishedRound() error {
	p, err := w.reserve(recordHeaderSize)
	if err != nil {
		return err
	}
	putHeader(p, RecordFinishedRound, 0, recordHeaderSize)
	return nil
}

// WriteRecord writes a record already encoded, header and all: for
// example one copied from a kernel ring buffer. Its header's size must be
// its length, a multiple of 8 as the kernel's are.
func (w *Writer) WriteRecord(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) < recordHeaderSize || len(rec) > maxRecordSize || len(rec)%8 != 0 {
		return fmt.Errorf("perfdata: WriteRecord of %d bytes: a record is 8 to %d bytes, a multiple of 8: %w", len(rec), maxRecordSize&^7, unix.EINVAL)
	}
	if size := ne.Uint16(rec[6:]); int(size) != len(rec) {
		return fmt.Errorf("perfdata: WriteRecord of %d bytes: its header says %d: %w", len(rec), size, unix.EINVAL)
	}
	p, err := w.reserve(len(rec))
	if err != nil {
		return err
	}
	copy(p, rec)
	return nil
}

// WriteRecords writes records already encoded, back to back — as a perf
// ring or a uetrace session's stream holds them — as they are: their
// headers are walked (each record 8 to 65535 bytes, a multiple of 8, as
// its header says, and together exactly b), their bodies not looked at.
// A run longer than a sixteenth of the Writer's buffer goes to the file
// straight from b, the buffer flushed before it: no copy here. b may be
// reused when WriteRecords returns.
func (w *Writer) WriteRecords(b []byte) error {
	if w.err != nil {
		return w.err
	}
	for r := b; len(r) > 0; {
		n := 0
		if len(r) >= recordHeaderSize {
			n = int(ne.Uint16(r[6:]))
		}
		if n < recordHeaderSize || n%8 != 0 || n > len(r) {
			return fmt.Errorf("perfdata: WriteRecords: a record of %d bytes with %d left of %d: a record is 8 to %d bytes, a multiple of 8: %w",
				n, len(r), len(b), maxRecordSize&^7, unix.EINVAL)
		}
		r = r[n:]
	}
	if len(b) <= writerBufSize/16 {
		p, err := w.reserve(len(b))
		if err != nil {
			return err
		}
		copy(p, b)
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	n, err := w.ws.Write(b)
	w.off += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("perfdata: write data at offset %d: %w", w.off, err)
	}
	return w.err
}

// Close writes the features, ids, attrs and header, and closes the file if
// Create made it. The file is complete only if Close returns nil.
func (w *Writer) Close() error {
	if w.err == errClosed {
		return errClosed
	}
	err := w.finish()
	w.err = errClosed
	if w.file != nil {
		if cerr := w.file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("perfdata: close: %w", cerr)
		}
	}
	return err
}

type section struct {
	f    Feature
	data []byte
}

// finish lays out the end of the file as perf_session__do_write_header does
// with write_attrs_after_data: the feature sections right after the data
// (perf finds them there: feat_offset is data.offset + data.size), then
// each attr's ids, then the attrs; then the header.
func (w *Writer) finish() error {
	if err := w.Flush(); err != nil {
		return err
	}
	dataEnd := w.off
	secs := w.features()

	var bitmap [featureBits / 64]uint64
	b := w.buf[:0]
	pos := dataEnd + int64(16*len(secs))
	for _, s := range secs {
		bitmap[s.f/64] |= 1 << (s.f % 64)
		b = ne.AppendUint64(b, uint64(pos))
		b = ne.AppendUint64(b, uint64(len(s.data)))
		pos += int64(len(s.data))
	}
	for _, s := range secs {
		b = append(b, s.data...)
	}

	idOffs := make([]int64, len(w.attrs))
	for i := range w.attrs {
		idOffs[i] = dataEnd + int64(len(b))
		for _, id := range w.attrs[i].IDs {
			b = ne.AppendUint64(b, id)
		}
	}
	attrSize := w.attrSize()
	attrsOff := dataEnd + int64(len(b))
	for i := range w.attrs {
		a := &w.attrs[i]
		b = appendAttr(b, a, attrSize)
		b = ne.AppendUint64(b, uint64(idOffs[i]))
		b = ne.AppendUint64(b, uint64(8*len(a.IDs)))
	}
	attrsSize := dataEnd + int64(len(b)) - attrsOff
	if _, err := w.ws.Write(b); err != nil {
		return fmt.Errorf("perfdata: write features and attrs at offset %d: %w", dataEnd, err)
	}
	h := appendHeader(b[:0], int64(attrSize+16), attrsOff, attrsSize, headerSize, dataEnd-headerSize, &bitmap)
	if _, err := w.ws.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("perfdata: seek to the header: %w", err)
	}
	if _, err := w.ws.Write(h); err != nil {
		return fmt.Errorf("perfdata: write header: %w", err)
	}
	if _, err := w.ws.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("perfdata: seek to the end: %w", err)
	}
	return nil
}

// attrSize is the size of every attr in the file (the header has one
// attr_size): VER7, or VER8 if any attr needs it.
func (w *Writer) attrSize() int {
	n := AttrSizeVer7
	for i := range w.attrs {
		n = max(n, w.attrs[i].encodedSize())
	}
	return n
}

// features encodes the feature sections that have data, in bit order.
func (w *Writer) features() []section {
	var secs []section
	if w.tracing != nil {
		secs = append(secs, section{FeatureTracingData, w.tracing})
	}
	m := &w.meta
	for _, s := range [...]struct {
		f Feature
		v string
	}{{FeatureHostname, m.Hostname}, {FeatureOSRelease, m.OSRelease}, {FeatureVersion, m.Version}, {FeatureArch, m.Arch}} {
		if s.v != "" {
			secs = append(secs, section{s.f, appendString(nil, s.v)})
		}
	}
	if m.NrCPUsAvail != 0 || m.NrCPUsOnline != 0 {
		b := ne.AppendUint32(nil, m.NrCPUsAvail)
		secs = append(secs, section{FeatureNrCPUs, ne.AppendUint32(b, m.NrCPUsOnline)})
	}
	if len(m.Cmdline) > 0 {
		b := ne.AppendUint32(nil, uint32(len(m.Cmdline)))
		for _, s := range m.Cmdline {
			b = appendString(b, s)
		}
		secs = append(secs, section{FeatureCmdline, b})
	}
	if len(w.attrs) > 0 {
		secs = append(secs, section{FeatureEventDesc, w.eventDesc()})
	}
	if c := w.clock; c != nil {
		// write_clock_data: version 1.
		b := ne.AppendUint32(nil, 1)
		b = ne.AppendUint32(b, uint32(c.ClockID))
		b = ne.AppendUint64(b, c.WallNS)
		secs = append(secs, section{FeatureClockData, ne.AppendUint64(b, c.ClockNS)})
	}
	return secs
}

// eventDesc encodes HEADER_EVENT_DESC as write_event_desc does.
func (w *Writer) eventDesc() []byte {
	size := w.attrSize()
	b := ne.AppendUint32(nil, uint32(len(w.attrs)))
	b = ne.AppendUint32(b, uint32(size))
	for i := range w.attrs {
		a := &w.attrs[i]
		b = appendAttr(b, a, size)
		b = ne.AppendUint32(b, uint32(len(a.IDs)))
		name := a.Name
		if name == "" && a.Type == TypeTracepoint {
			name = w.tracepoint[a.Config]
		}
		b = appendString(b, name)
		for _, id := range a.IDs {
			b = ne.AppendUint64(b, id)
		}
	}
	return b
}
