package ftrace

import "io"

// TextReader is the trace file read as the kernel's seq_file reads it:
// the text is made as it is read, from one iterator held while the file is
// open, so an open trace holds the iterator and the text of the entry
// being read — never the whole buffer's text, however large the buffer.
//
// Reads go on from where the last one ended; a read at an earlier offset
// starts the text again (s_start: the iterators reset, the header printed
// with the counts of that moment) and one at a later offset makes and
// skips the text in between (seq_read's traverse). The iterator's marks
// of the CPUs whose buffer-started line was printed stay set across a
// restart, as iter->started does.
type TextReader struct {
	it    *Iter
	pos   int64  // the text's offset of buf[0]
	buf   []byte // text made and not yet read, from pos
	begun bool
	done  bool
	e     Entry
}

// NewTextReader opens an iterator over all CPUs (cpu < 0) or one CPU's
// buffer, for reading the trace file's text.
func (r *Ring) NewTextReader(cpu int) *TextReader {
	return &TextReader{it: r.NewIter(cpu)}
}

// Close closes the iterator; the buffers can be resized again.
func (t *TextReader) Close() {
	t.it.Close()
	t.buf = nil
}

// ReadAt reads the text at offset off, as io.ReaderAt; reads are expected
// to go on in order (any other costs making the text again), and to come
// one at a time.
func (t *TextReader) ReadAt(p []byte, off int64) (int, error) {
	if !t.begun || off < t.pos {
		t.restart()
	}
	// Make, and drop, the text before off.
	for off >= t.pos+int64(len(t.buf)) && !t.done {
		t.pos += int64(len(t.buf))
		t.buf = t.buf[:0]
		t.more()
	}
	skip := off - t.pos
	if skip >= int64(len(t.buf)) {
		t.pos += int64(len(t.buf))
		t.buf = t.buf[:0]
		return 0, io.EOF
	}
	for int64(len(t.buf))-skip < int64(len(p)) && !t.done {
		t.more()
	}
	n := copy(p, t.buf[skip:])
	// Keep only what is after this read.
	t.pos += skip + int64(n)
	t.buf = t.buf[:copy(t.buf, t.buf[skip+int64(n):])]
	if n < len(p) {
		return n, io.EOF // the text ends here
	}
	return n, nil
}

// restart starts the text again: the header, then the first entry.
func (t *TextReader) restart() {
	if t.begun {
		t.it.rewind()
	}
	t.begun, t.done, t.pos = true, false, 0
	in, written := t.it.r.Entries()
	t.buf = AppendHeader(t.buf[:0], in, written, len(t.it.r.cpus))
}

// more appends the next entry's text, or what follows the last.
func (t *TextReader) more() {
	var ok bool
	if t.buf, ok = t.it.AppendNext(t.buf, &t.e); !ok {
		t.buf = t.it.r.appendDropsAfter(t.buf, t.it.only, false)
		t.done = true
	}
}
