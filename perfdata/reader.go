package perfdata

import (
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// A Record is one record of the data section, as Reader.Next returns it.
// Its slices alias the Reader's buffer or the file's mapping: they are
// valid until the next call to Next or Close.
type Record struct {
	Type   RecordType
	Misc   uint16
	Offset int64  // file offset of the record
	Data   []byte // the record after its 8-byte header

	// Attr is the attr the record belongs to: a sample's, found by its
	// id, or the one whose sample_type lays out a kernel record's
	// sample_id trailer. It is nil for perf's own records (RecordType 64
	// and up), without a trailer, and when the id is in no attr.
	Attr *Attr
	// Sample is, for RecordSample, the sample (when Attr is nil, only
	// its ID is known); for other kernel records with a sample_id
	// trailer, the trailer's PID, TID, Time, ID, StreamID and CPU.
	Sample Sample

	PID, TID uint32 // RecordComm, RecordFork, RecordExit: the thread
	Comm     []byte // RecordComm: its name, without the NUL
	// PPID and PTID are, for RecordFork and RecordExit, the parent: the
	// thread that made this one (struct perf_record_fork).
	PPID, PTID uint32
	Time       uint64 // RecordFork, RecordExit: when
	ID         uint64 // RecordLost: the sample id of the instance that lost records
	Lost       uint64 // RecordLost, RecordLostSamples: how many were lost
}

// readerBufSize is the size of the Reader's reads of the data section.
const readerBufSize = 1 << 20

// A Reader reads a perf.data file: the header, attrs and features at open,
// then the records of the data section, one by one, with Next.
//
// What the methods return is the Reader's: treat it as read-only.
type Reader struct {
	attrs   []Attr
	meta    Meta
	tracing *TracingData
	clock   *ClockData

	ra       io.ReaderAt
	file     *os.File // closed by Close: Open opened it
	mapping  []byte   // the file mapped by Open, unmapped by Close; nil if read with ReadAt
	size     int64
	features [featureBits / 64]uint64
	sections [featureBits]fileSection

	info        []attrInfo
	ids         map[uint64]int
	idPos       int // of the first attr: where samples keep their id
	isPos       int // of the first attr: where trailers keep their id
	sampleIDAll bool
	lastID      uint64
	lastAttr    int // the attr of lastID; < 0 when none

	// pipe is set for a pipe-mode stream: its attrs, tracing data and
	// features are records of the data, read at open up to pipeScanned.
	pipe        bool
	pipeScanned int64

	dataOff, dataEnd int64
	buf              []byte
	start, end       int   // buf[start:end] is data not yet returned
	bufOff           int64 // file offset of buf[0]
	err              error // sticky: io.EOF or a broken record framing
}

type fileSection struct{ off, size int64 }

// Open opens the perf.data file name and maps its data section, as perf
// does (like perf, a file truncated while it is read then faults), or reads
// it with ReadAt if it cannot be mapped. Close closes it.
func Open(name string) (*Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.file = f
	r.mapData()
	return r, nil
}

// mapData maps the data section of the file, as perf does: no copy and no
// read calls. If mmap fails, Next reads with ReadAt.
func (r *Reader) mapData() {
	if r.dataEnd == r.dataOff || r.dataEnd > int64(^uint(0)>>1) {
		return
	}
	page := int64(os.Getpagesize())
	start := r.dataOff &^ (page - 1)
	m, err := unix.Mmap(int(r.file.Fd()), start, int(r.dataEnd-start), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return
	}
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL) // only a hint
	r.mapping = m
	r.buf = m[r.dataOff-start:]
	r.rewind()
}

// NewReader reads the header, attrs and features of the perf.data file of
// size bytes in ra. Errors say what is wrong and at which offset
// (*FormatError).
func NewReader(ra io.ReaderAt, size int64) (*Reader, error) {
	r := &Reader{ra: ra, size: size, lastAttr: -1}
	if err := r.readHeader(); err != nil {
		return nil, err
	}
	return r, nil
}

// Mapped reports whether the data section is mapped (Open maps it when it
// can): then the slices in the records Next returns stay valid until Close,
// not only until the next Next.
func (r *Reader) Mapped() bool { return r.mapping != nil }

// Close closes the file if Open opened it. Records returned before alias
// the file's mapping: they are invalid after Close.
func (r *Reader) Close() error {
	r.err = io.EOF
	r.buf = nil
	if r.mapping != nil {
		unix.Munmap(r.mapping)
		r.mapping = nil
	}
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}

// readAt reads n bytes at off, which must be inside the file.
func (r *Reader) readAt(off int64, n uint64, what string) ([]byte, error) {
	if off < 0 || off > r.size || n > uint64(r.size-off) {
		return nil, truncErr(off, "%s of %d bytes goes beyond the end of the file (%d bytes)", what, n, r.size)
	}
	b := make([]byte, n)
	if k, err := r.ra.ReadAt(b, off); k < len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &FormatError{Offset: off + int64(k), What: fmt.Sprintf("reading %s: %v", what, err), Err: err}
	}
	return b, nil
}

// inFile reports whether the section [off, off+size) is inside the file.
func (r *Reader) inFile(off, size uint64) bool {
	return off <= uint64(r.size) && size <= uint64(r.size)-off
}

// readHeader reads everything but the data, as perf_session__read_header.
func (r *Reader) readHeader() error {
	if r.size < pipeHeaderSize {
		return truncErr(0, "a file of %d bytes is too short for a perf.data header", r.size)
	}
	h, err := r.readAt(0, pipeHeaderSize, "header")
	if err != nil {
		return err
	}
	switch m := ne.Uint64(h); m {
	case magic:
	case magicSwapped:
		return formatErr(0, "written on a machine of the other byte order, which perfdata does not read")
	case legacyMagic:
		return formatErr(0, "a version 1 (\"PERFFILE\") perf.data, which perfdata does not read")
	default:
		return formatErr(0, "not a perf.data file: it starts with %q, not \"PERFILE2\"", h[:8])
	}
	hsize := ne.Uint64(h[8:])
	switch hsize {
	case headerSize, headerSizeNoFeatures:
	case pipeHeaderSize:
		if err := r.readPipeHeader(); err != nil {
			return err
		}
		r.indexAttrs()
		r.startData()
		return nil
	default:
		return formatErr(8, "header size %d: a file-mode header is %d bytes, a pipe-mode one %d", hsize, headerSize, pipeHeaderSize)
	}
	if h, err = r.readAt(0, hsize, "header"); err != nil {
		return err
	}
	attrSize := ne.Uint64(h[16:])
	attrs := fileSection{int64(ne.Uint64(h[24:])), int64(ne.Uint64(h[32:]))}
	data := fileSection{int64(ne.Uint64(h[40:])), int64(ne.Uint64(h[48:]))}
	if hsize == headerSize {
		for i := range r.features {
			r.features[i] = ne.Uint64(h[72+8*i:])
		}
	}

	// perf_file_header__read's checks, then ours: sections inside the file.
	if uint64(attrs.off) < hsize || uint64(data.off) < hsize {
		return formatErr(24, "the header overlaps the attrs (offset %d) or the data (offset %d)", uint64(attrs.off), uint64(data.off))
	}
	if !r.inFile(uint64(attrs.off), uint64(attrs.size)) {
		return truncErr(24, "the attrs section (%d bytes at %d) goes beyond the end of the file (%d bytes)", uint64(attrs.size), uint64(attrs.off), r.size)
	}
	if !r.inFile(uint64(data.off), uint64(data.size)) {
		return truncErr(40, "the data section (%d bytes at %d) goes beyond the end of the file (%d bytes)", uint64(data.size), uint64(data.off), r.size)
	}
	if attrs.off <= data.off && attrs.off+attrs.size > data.off ||
		attrs.off > data.off && data.off+data.size > attrs.off {
		return formatErr(24, "the attrs (%d bytes at %d) and the data (%d bytes at %d) overlap", attrs.size, attrs.off, data.size, data.off)
	}
	if attrSize == 0 {
		return formatErr(16, "attr size is 0: the file was not finished (was the recorder stopped cleanly?)")
	}
	r.dataOff, r.dataEnd = data.off, data.off+data.size

	if err := r.readAttrs(attrs, attrSize); err != nil {
		return err
	}
	if err := r.readFeatureTable(); err != nil {
		return err
	}
	if err := r.decodeFeatures(); err != nil {
		return err
	}
	r.indexAttrs()
	r.startData()
	return nil
}

// indexAttrs names the attrs of tracepoints by the tracing data and
// indexes their ids, once the attrs and the features are read.
func (r *Reader) indexAttrs() {
	for i := range r.attrs {
		a := &r.attrs[i]
		if a.Name == "" && a.Type == TypeTracepoint && r.tracing != nil {
			if sys, f, ok := r.tracing.FindFormat(a.Config); ok {
				a.Name = sys + ":" + FormatName(f)
			}
		}
	}

	r.info = make([]attrInfo, len(r.attrs))
	r.ids = make(map[uint64]int)
	for i := range r.attrs {
		r.info[i] = newAttrInfo(&r.attrs[i])
		for _, id := range r.attrs[i].IDs {
			if _, dup := r.ids[id]; !dup {
				r.ids[id] = i
			}
		}
	}
	r.idPos, r.isPos = -1, -1
	if len(r.attrs) > 0 {
		first := &r.attrs[0]
		r.idPos, r.isPos = idPos(first.SampleType), isPos(first.SampleType)
		r.sampleIDAll = first.Flags&AttrSampleIDAll != 0
	}
}

// startData readies the reading of the data.
func (r *Reader) startData() {
	if size := r.dataEnd - r.dataOff; size > 0 {
		r.buf = make([]byte, min(size, readerBufSize))
	}
	r.bufOff = r.dataOff
}

// readPipeHeader reads what a pipe-mode stream (perf record -o -) says at
// its start, as records rather than sections: its attrs
// (PERF_RECORD_HEADER_ATTR), tracing data (HEADER_TRACING_DATA, whose
// data follows the record), features (HEADER_FEATURE) and event names
// (EVENT_UPDATE), up to the first kernel record or FINISHED_INIT. The
// data is everything after the 16-byte header; Next returns these records
// too.
func (r *Reader) readPipeHeader() error {
	r.pipe = true
	r.dataOff, r.dataEnd = pipeHeaderSize, r.size
	off := r.dataOff
	for r.size-off >= recordHeaderSize {
		h, err := r.readAt(off, recordHeaderSize, "record header")
		if err != nil {
			return err
		}
		typ := RecordType(ne.Uint32(h))
		size := int64(ne.Uint16(h[6:]))
		if size < recordHeaderSize {
			return formatErr(off, "record size %d is less than its 8-byte header", size)
		}
		if typ < RecordUserTypeStart || typ == RecordFinishedRound || typ == RecordFinishedInit {
			break
		}
		b, err := r.readAt(off, uint64(size), typ.String()+" record")
		if err != nil {
			return err
		}
		if off, err = r.pipeRecord(off, b); err != nil {
			return err
		}
	}
	r.pipeScanned = off
	return r.decodeFeatures()
}

// pipeRecord takes in the header record rec of a pipe-mode stream, at
// offset off, and returns the offset of the next record.
func (r *Reader) pipeRecord(off int64, rec []byte) (int64, error) {
	next := off + int64(len(rec))
	body := rec[recordHeaderSize:]
	switch RecordType(ne.Uint32(rec)) {
	case RecordHeaderAttr:
		if len(body) < 8 {
			return 0, formatErr(off, "HEADER_ATTR record of %d bytes is shorter than an attr's type and size", len(rec))
		}
		sz := int(ne.Uint32(body[4:]))
		switch {
		case sz == 0:
			sz = AttrSizeVer0
		case sz < AttrSizeVer0:
			return 0, formatErr(off, "HEADER_ATTR record: attr size %d is less than the first perf_event_attr (%d)", sz, AttrSizeVer0)
		}
		if sz > len(body) {
			return 0, formatErr(off, "HEADER_ATTR record of %d bytes is shorter than its attr (%d bytes)", len(rec), sz)
		}
		a := decodeAttr(body[:sz])
		ids := body[sz:]
		a.IDs = make([]uint64, len(ids)/8)
		for j := range a.IDs {
			a.IDs[j] = ne.Uint64(ids[8*j:])
		}
		r.attrs = append(r.attrs, a)
	case RecordTracingData:
		// struct perf_record_header_tracing_data: the data's size, its
		// bytes after the record (perf_event__process_tracing_data).
		if len(body) < 4 {
			return 0, formatErr(off, "HEADER_TRACING_DATA record of %d bytes has no size", len(rec))
		}
		size := int64(ne.Uint32(body))
		if !r.inFile(uint64(next), uint64(size)) {
			return 0, truncErr(off, "tracing data of %d bytes goes beyond the end of the stream (%d bytes)", size, r.size)
		}
		r.features[FeatureTracingData/64] |= 1 << (FeatureTracingData % 64)
		r.sections[FeatureTracingData] = fileSection{next, size}
		next += size
	case RecordHeaderFeature:
		// struct perf_record_header_feature: feat_id, then the section.
		if len(body) < 8 {
			return 0, formatErr(off, "HEADER_FEATURE record of %d bytes has no feature id", len(rec))
		}
		if f := ne.Uint64(body); f < featureBits && Feature(f) != FeatureTracingData {
			r.features[f/64] |= 1 << (f % 64)
			r.sections[f] = fileSection{off + recordHeaderSize + 8, int64(len(body) - 8)}
		}
	case RecordEventUpdate:
		// struct perf_record_event_update: type, id, then for
		// PERF_EVENT_UPDATE__NAME (2) the event's name.
		if len(body) >= 16 && ne.Uint64(body) == 2 {
			id := ne.Uint64(body[8:])
			name := body[16:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			for i := range r.attrs {
				if slices.Contains(r.attrs[i].IDs, id) {
					r.attrs[i].Name = string(name)
				}
			}
		}
	}
	return next, nil
}

// maxAttrSlot bounds the header's attr_size, as perf-decode does: no
// perf_event_attr comes near it, and one slot is read whole.
const maxAttrSlot = 0x10000

// readAttrs reads the attrs and their ids. The header's attr_size is the
// size of one slot, a perf_event_attr and its ids section; each attr is
// decoded from its own size field's bytes (0 means PERF_ATTR_SIZE_VER0),
// at most the slot's. Perf's read_attr steps by the attr's size instead,
// which is the same in the files perf writes; Microsoft's perf-collect
// writes 128-byte slots whose attrs say 96, which perf 6.1 misreads and
// perf-decode (PerfDataFile::LoadAttrs) reads by the slot, as here.
func (r *Reader) readAttrs(attrs fileSection, attrSize uint64) error {
	if attrSize < AttrSizeVer0+16 || attrSize > maxAttrSlot {
		return formatErr(16, "attr size %d: a perf_event_attr and its ids section take %d to %d bytes", attrSize, AttrSizeVer0+16, maxAttrSlot)
	}
	slot := attrSize - 16
	n := uint64(attrs.size) / attrSize
	pos := attrs.off
	var idBytes uint64
	for i := uint64(0); i < n; i++ {
		b, err := r.readAt(pos, attrSize, fmt.Sprintf("attr %d", i))
		if err != nil {
			return err
		}
		sz := uint64(ne.Uint32(b[4:]))
		switch {
		case sz == 0:
			sz = AttrSizeVer0
		case sz < AttrSizeVer0:
			return formatErr(pos+4, "attr %d has size %d, less than the first perf_event_attr (%d)", i, sz, AttrSizeVer0)
		}
		a := decodeAttr(b[:min(sz, slot)])
		idsOff, idsSize := ne.Uint64(b[slot:]), ne.Uint64(b[slot+8:])
		if !r.inFile(idsOff, idsSize) {
			return truncErr(pos+int64(slot), "attr %d: its ids (%d bytes at %d) go beyond the end of the file (%d bytes)", i, idsSize, idsOff, r.size)
		}
		// Bound the ids of all attrs together by the file, so attrs
		// pointing at one region cannot multiply it.
		if idBytes += idsSize; idBytes > uint64(r.size) {
			return formatErr(pos+int64(slot), "attr %d: the attrs' ids add up to more bytes than the file has", i)
		}
		ids, err := r.readAt(int64(idsOff), idsSize/8*8, fmt.Sprintf("attr %d's ids", i))
		if err != nil {
			return err
		}
		a.IDs = make([]uint64, len(ids)/8)
		for j := range a.IDs {
			a.IDs[j] = ne.Uint64(ids[8*j:])
		}
		r.attrs = append(r.attrs, a)
		pos += int64(attrSize)
	}
	return nil
}

// Attrs returns the events of the file. An attr's Name comes from
// HEADER_EVENT_DESC or, for a tracepoint, from the tracing data's format
// whose ID is its Config.
func (r *Reader) Attrs() []Attr { return r.attrs }

// Meta returns the host facts of the file's simple features.
func (r *Reader) Meta() Meta { return r.meta }

// TracingData returns the file's HEADER_TRACING_DATA, or nil when it has
// none.
func (r *Reader) TracingData() *TracingData { return r.tracing }

// ClockData returns the file's HEADER_CLOCK_DATA (perf record -k), which
// turns its sample times into wall-clock times, or false when it has none.
func (r *Reader) ClockData() (ClockData, bool) {
	if r.clock == nil {
		return ClockData{}, false
	}
	return *r.clock, true
}

// HasFeature reports whether the file has the feature section f.
func (r *Reader) HasFeature(f Feature) bool {
	return f >= 0 && f < featureBits && r.features[f/64]&(1<<(f%64)) != 0
}

// Features returns the features the file has, in order.
func (r *Reader) Features() []Feature {
	var fs []Feature
	for f := Feature(0); f < featureBits; f++ {
		if r.HasFeature(f) {
			fs = append(fs, f)
		}
	}
	return fs
}

// FeatureData returns the bytes of the feature section f, for the features
// perfdata does not decode.
func (r *Reader) FeatureData(f Feature) ([]byte, error) {
	if !r.HasFeature(f) {
		return nil, fmt.Errorf("perf.data: no %s feature", f)
	}
	s := r.sections[f]
	return r.readAt(s.off, uint64(s.size), "feature "+f.String())
}

// readFeatureTable reads the feature table after the data
// (perf_header__process_sections).
func (r *Reader) readFeatureTable() error {
	n := 0
	for _, w := range r.features {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return nil
	}
	table, err := r.readAt(r.dataEnd, uint64(16*n), "feature table")
	if err != nil {
		return err
	}
	i := 0
	for f := Feature(0); f < featureBits; f++ {
		if !r.HasFeature(f) {
			continue
		}
		off, size := ne.Uint64(table[16*i:]), ne.Uint64(table[16*i+8:])
		if !r.inFile(off, size) {
			return truncErr(r.dataEnd+int64(16*i), "feature %s (%d bytes at %d) goes beyond the end of the file (%d bytes)", f, size, off, r.size)
		}
		r.sections[f] = fileSection{int64(off), int64(size)}
		i++
	}
	return nil
}

// decodeFeatures decodes the features perfdata knows.
func (r *Reader) decodeFeatures() error {
	var descs []string
	for _, f := range [...]Feature{FeatureTracingData, FeatureHostname, FeatureOSRelease, FeatureVersion,
		FeatureArch, FeatureNrCPUs, FeatureCmdline, FeatureEventDesc, FeatureClockData} {
		if !r.HasFeature(f) {
			continue
		}
		b, err := r.FeatureData(f)
		if err != nil {
			return err
		}
		fr := &featReader{b: b, off: r.sections[f].off, f: f}
		switch f {
		case FeatureTracingData:
			r.tracing = decodeTracingData(fr)
		case FeatureHostname:
			r.meta.Hostname = fr.string("hostname")
		case FeatureOSRelease:
			r.meta.OSRelease = fr.string("osrelease")
		case FeatureVersion:
			r.meta.Version = fr.string("version")
		case FeatureArch:
			r.meta.Arch = fr.string("arch")
		case FeatureNrCPUs:
			r.meta.NrCPUsAvail = fr.u32("nrcpus avail")
			r.meta.NrCPUsOnline = fr.u32("nrcpus online")
		case FeatureCmdline:
			c := fr.u32("argument count")
			r.meta.Cmdline = make([]string, 0, fr.countLimit(uint64(c), 4))
			for j := uint32(0); j < c && fr.err == nil; j++ {
				r.meta.Cmdline = append(r.meta.Cmdline, fr.string("argument"))
			}
		case FeatureEventDesc:
			descs = decodeEventDesc(fr)
		case FeatureClockData:
			// process_clock_data: only version 1 is known; perf ignores
			// others, and so does perfdata.
			if fr.u32("clock data version") == 1 {
				c := ClockData{ClockID: int32(fr.u32("clockid"))}
				c.WallNS = fr.u64("wall-clock time")
				c.ClockNS = fr.u64("clockid time")
				if fr.err == nil {
					r.clock = &c
				}
			}
		}
		if fr.err != nil {
			return fr.err
		}
	}
	// process_event_desc names the attrs by index.
	for i, name := range descs {
		if i < len(r.attrs) && r.attrs[i].Name == "" {
			r.attrs[i].Name = name
		}
	}
	return nil
}

// decodeEventDesc decodes HEADER_EVENT_DESC (read_event_desc) and returns
// the names of the events.
func decodeEventDesc(r *featReader) []string {
	nre := r.u32("event count")
	sz := r.u32("attr size")
	names := make([]string, 0, r.countLimit(uint64(nre), int(min(sz, 1<<20))+8))
	for i := uint32(0); i < nre && r.err == nil; i++ {
		r.bytes(uint64(sz), "attr")
		nids := r.u32("id count")
		names = append(names, r.string("name"))
		r.bytes(8*uint64(nids), "ids")
	}
	return names
}

// Next returns the next record of the data section, in file order, or
// io.EOF after the last. Next does not allocate.
//
// A record that cannot be decoded (a sample shorter than its sample_type,
// a trailer longer than its record) gives a *FormatError; the next call
// goes on with the record after it. An error in the framing itself (a
// record size smaller than its header, a record past the end of the data)
// stops the iteration: every later call returns it.
//
// The results are named so that the record is built in place, not copied
// out of a local: that is a quarter of the time of a sample.
func (r *Reader) Next() (rec Record, err error) {
	if err = r.next(&rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// next reads the next record into rec, which must be zero. A Session
// reads into a record of its own, for the same reason as Next's results
// are named.
func (r *Reader) next(rec *Record) (err error) {
	if r.err != nil {
		return r.err
	}
	if r.end-r.start < recordHeaderSize {
		if err := r.fill(recordHeaderSize); err != nil {
			return err
		}
	}
	off := r.bufOff + int64(r.start)
	size := int(ne.Uint16(r.buf[r.start+6:]))
	if size < recordHeaderSize {
		r.err = formatErr(off, "record size %d is less than its 8-byte header", size)
		return r.err
	}
	if r.end-r.start < size {
		if err := r.fill(size); err != nil {
			return err
		}
	}
	b := r.buf[r.start : r.start+size : r.start+size]
	r.start += size

	rec.Type = RecordType(ne.Uint32(b))
	rec.Misc = ne.Uint16(b[4:])
	rec.Offset = off
	rec.Data = b[recordHeaderSize:]
	switch {
	case rec.Type == RecordSample:
		return r.sample(rec)
	case rec.Type < RecordUserTypeStart:
		return r.kernelRecord(rec)
	case r.pipe:
		return r.pipeNext(rec)
	}
	return nil
}

// pipeNext handles a header record of a pipe-mode stream as Next meets
// it: the tracing data after a HEADER_TRACING_DATA record is skipped
// (Data stays the record's own bytes), and an attr or event name that
// comes after those read at open is taken in.
func (r *Reader) pipeNext(rec *Record) error {
	switch rec.Type {
	case RecordTracingData:
		if len(rec.Data) < 4 {
			r.err = formatErr(rec.Offset, "HEADER_TRACING_DATA record of %d bytes has no size", len(rec.Data)+recordHeaderSize)
			return r.err
		}
		return r.skip(int64(ne.Uint32(rec.Data)))
	case RecordHeaderAttr, RecordEventUpdate:
		if rec.Offset < r.pipeScanned {
			return nil
		}
		b := make([]byte, recordHeaderSize+len(rec.Data))
		copy(b[recordHeaderSize:], rec.Data)
		ne.PutUint32(b, uint32(rec.Type))
		if _, err := r.pipeRecord(rec.Offset, b); err != nil {
			return err
		}
		// A new attr: index it (its Attr pointers change).
		r.lastAttr = -1
		r.indexAttrs()
	}
	return nil
}

// skip skips n bytes of the data after the last record returned.
func (r *Reader) skip(n int64) error {
	if left := int64(r.end - r.start); n <= left {
		r.start += int(n)
		return nil
	}
	off := r.bufOff + int64(r.start) + n
	if off > r.dataEnd {
		r.err = truncErr(r.bufOff+int64(r.start), "%d bytes of tracing data go beyond the end of the data (%d bytes left)", n, r.dataEnd-r.bufOff-int64(r.start))
		return r.err
	}
	r.bufOff, r.start, r.end = off, 0, 0
	return nil
}

// rewind starts the records again from the first (for benchmarks).
func (r *Reader) rewind() {
	r.start, r.end, r.bufOff, r.err = 0, 0, r.dataOff, nil
	if r.mapping != nil {
		r.end = len(r.buf) // the whole data section is there; fill never reads
	}
}

// fill makes at least need bytes of data available at buf[start:], moving
// what is left to the front of the buffer and reading after it.
func (r *Reader) fill(need int) error {
	left := r.end - r.start
	next := r.bufOff + int64(r.end) // file offset of the next byte to read
	unread := r.dataEnd - next
	if left == 0 && unread == 0 {
		r.err = io.EOF
		return r.err
	}
	if int64(left)+unread < int64(need) {
		r.err = truncErr(r.bufOff+int64(r.start), "a record of %d bytes goes beyond the end of the data section (%d bytes left)", need, int64(left)+unread)
		return r.err
	}
	copy(r.buf, r.buf[r.start:r.end])
	r.bufOff += int64(r.start)
	r.start, r.end = 0, left
	n := int(min(int64(len(r.buf)-left), unread))
	k, err := r.ra.ReadAt(r.buf[left:left+n], next)
	r.end += k
	if k < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		r.err = &FormatError{Offset: next + int64(k), What: fmt.Sprintf("reading the data section: %v", err), Err: err}
		return r.err
	}
	return nil
}

// attrOfID returns the attr of a sample id as evlist__event2evsel finds it:
// with id 0 (a record perf synthesized) the first attr; -1 when the id is in
// no attr.
func (r *Reader) attrOfID(id uint64) int {
	if id == r.lastID && r.lastAttr >= 0 {
		return r.lastAttr
	}
	i, ok := r.ids[id]
	if !ok {
		if id != 0 {
			return -1
		}
		i = 0
	}
	r.lastID, r.lastAttr = id, i
	return i
}

// sample decodes a PERF_RECORD_SAMPLE by its attr's sample_type
// (evsel__parse_sample).
func (r *Reader) sample(rec *Record) error {
	b := rec.Data
	s := &rec.Sample
	s.Misc = rec.Misc
	ai := 0
	if len(r.attrs) == 0 {
		return nil
	}
	if len(r.attrs) > 1 && r.idPos >= 0 {
		p := 8 * r.idPos
		if len(b) < p+8 {
			return formatErr(rec.Offset, "sample of %d bytes has no room for its id at byte %d", len(b), p)
		}
		s.ID = ne.Uint64(b[p:])
		if ai = r.attrOfID(s.ID); ai < 0 {
			return nil
		}
	}
	rec.Attr = &r.attrs[ai]
	in := &r.info[ai]
	st := in.sampleType
	if len(b) < in.fixed {
		return formatErr(rec.Offset, "sample of %d bytes is shorter than the %d bytes of sample_type %s (attr %d)", len(b), in.fixed, sampleTypeString(st), ai)
	}
	i := 0
	if st&SampleIdentifier != 0 {
		s.ID = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleIP != 0 {
		s.IP = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleTID != 0 {
		s.PID = ne.Uint32(b[i:])
		s.TID = ne.Uint32(b[i+4:])
		i += 8
	}
	if st&SampleTime != 0 {
		s.Time = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleAddr != 0 {
		s.Addr = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleID != 0 {
		s.ID = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleStreamID != 0 {
		s.StreamID = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleCPU != 0 {
		s.CPU = ne.Uint32(b[i:])
		i += 8
	}
	if st&SamplePeriod != 0 {
		s.Period = ne.Uint64(b[i:])
		i += 8
	}
	if st&(SampleRead|SampleCallchain|SampleRaw) == 0 {
		return nil
	}
	return r.sampleTail(rec, ai, i)
}

// sampleTail decodes what follows the fixed fields of a sample: READ and
// CALLCHAIN are skipped, RAW is kept; the fields after RAW are left in
// Data.
func (r *Reader) sampleTail(rec *Record, ai, i int) error {
	b := rec.Data
	in := &r.info[ai]
	st := in.sampleType
	short := func(what string, start int) error {
		return formatErr(rec.Offset+recordHeaderSize+int64(start), "sample of %d bytes ends inside its %s, which starts at byte %d (attr %d)", len(b), what, start, ai)
	}
	if st&SampleRead != 0 {
		rf := in.readFormat
		n := 1 // value, or nr
		if rf&FormatTotalTimeEnabled != 0 {
			n++
		}
		if rf&FormatTotalTimeRunning != 0 {
			n++
		}
		if rf&FormatGroup != 0 {
			if len(b)-i < 8 {
				return short("read values", i)
			}
			nr := ne.Uint64(b[i:])
			per := uint64(1 + u64s(rf, FormatID|FormatLost)) // struct sample_read_value
			if nr > uint64(len(b))/(8*per) {
				return short("read values", i)
			}
			n += int(nr * per)
		} else {
			n += u64s(rf, FormatID|FormatLost)
		}
		if len(b)-i < 8*n {
			return short("read values", i)
		}
		i += 8 * n
	}
	if st&SampleCallchain != 0 {
		if len(b)-i < 8 || ne.Uint64(b[i:]) > uint64(len(b)-i-8)/8 {
			return short("callchain", i)
		}
		i += 8 + 8*int(ne.Uint64(b[i:]))
	}
	if st&SampleRaw != 0 {
		if len(b)-i < 4 || uint64(ne.Uint32(b[i:])) > uint64(len(b)-i-4) {
			return short("raw data", i)
		}
		n := int(ne.Uint32(b[i:]))
		rec.Sample.Raw = b[i+4 : i+4+n : i+4+n]
	}
	return nil
}

// kernelRecord decodes the sample_id trailer of a kernel record other than
// a sample, when the first attr has sample_id_all (perf_evsel__parse_id_sample),
// and the bodies of COMM, LOST and LOST_SAMPLES.
func (r *Reader) kernelRecord(rec *Record) error {
	b := rec.Data
	trailer := 0
	if r.sampleIDAll && len(r.attrs) > 0 {
		ai := 0
		if len(r.attrs) > 1 && r.isPos >= 0 {
			p := len(b) - 8*r.isPos
			if p < 0 {
				return formatErr(rec.Offset, "%s record of %d bytes has no room for the id of its sample_id trailer", rec.Type, len(b))
			}
			ai = r.attrOfID(ne.Uint64(b[p:]))
		}
		if ai >= 0 {
			in := &r.info[ai]
			trailer = in.trailer
			if len(b) < trailer {
				return formatErr(rec.Offset, "%s record of %d bytes is shorter than its sample_id trailer (%d bytes, attr %d)", rec.Type, len(b), trailer, ai)
			}
			rec.Attr = &r.attrs[ai]
			decodeTrailer(&rec.Sample, b[len(b)-trailer:], in.sampleType)
			rec.Sample.Misc = rec.Misc
		}
	}
	body := b[:len(b)-trailer]
	switch rec.Type {
	case RecordComm:
		if len(body) < 8 {
			return formatErr(rec.Offset, "COMM record of %d bytes (%d without its trailer) is shorter than pid, tid", len(b), len(body))
		}
		rec.PID = ne.Uint32(body)
		rec.TID = ne.Uint32(body[4:])
		name := body[8:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		rec.Comm = name
	case RecordFork, RecordExit:
		if len(body) < 24 {
			return formatErr(rec.Offset, "%s record of %d bytes (%d without its trailer) is shorter than pid, ppid, tid, ptid, time", rec.Type, len(b), len(body))
		}
		rec.PID, rec.PPID = ne.Uint32(body), ne.Uint32(body[4:])
		rec.TID, rec.PTID = ne.Uint32(body[8:]), ne.Uint32(body[12:])
		rec.Time = ne.Uint64(body[16:])
	case RecordLost:
		if len(body) < 16 {
			return formatErr(rec.Offset, "LOST record of %d bytes (%d without its trailer) is shorter than id, lost", len(b), len(body))
		}
		rec.ID = ne.Uint64(body)
		rec.Lost = ne.Uint64(body[8:])
	case RecordLostSamples:
		if len(body) < 8 {
			return formatErr(rec.Offset, "LOST_SAMPLES record of %d bytes (%d without its trailer) is shorter than lost", len(b), len(body))
		}
		rec.Lost = ne.Uint64(body)
	}
	return nil
}

// decodeTrailer decodes a struct sample_id.
func decodeTrailer(s *Sample, b []byte, st uint64) {
	i := 0
	if st&SampleTID != 0 {
		s.PID = ne.Uint32(b[i:])
		s.TID = ne.Uint32(b[i+4:])
		i += 8
	}
	if st&SampleTime != 0 {
		s.Time = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleID != 0 {
		s.ID = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleStreamID != 0 {
		s.StreamID = ne.Uint64(b[i:])
		i += 8
	}
	if st&SampleCPU != 0 {
		s.CPU = ne.Uint32(b[i:])
		i += 8
	}
	if st&SampleIdentifier != 0 {
		s.ID = ne.Uint64(b[i:])
	}
}
