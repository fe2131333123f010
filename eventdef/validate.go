package eventdef

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// CheckSize checks a payload length against the event the way the write path
// does before anything is recorded (user_events_write_core): a payload
// shorter than MinSize is EINVAL, whether or not the event is enabled. The
// kernel compares the size_t length with the int min_size, so a MinSize that
// wrapped negative rejects every payload.
func (e *Event) CheckSize(n int) error {
	// Small enough to be inlined into every write; the error is made out
	// of line.
	if e.MinSize < 0 || n < e.MinSize {
		return e.sizeError(n)
	}
	return nil
}

func (e *Event) sizeError(n int) error {
	return errorf(unix.EINVAL, 0, "", "payload of %d bytes is shorter than the event's %d bytes of fields", n, uint(e.MinSize))
}

// HasValidators reports whether records of this event need Validate: whether
// it has __data_loc or __rel_loc fields.
func (e *Event) HasValidators() bool { return e.hasLoc }

// Validate checks a record — the 8-byte header followed by the payload — as
// user_event_validate does for every record it is about to commit:
//
//   - For each __data_loc / __rel_loc field in order, the u32 at the field is
//     split into offset (low 16 bits) and length (high 16 bits). __data_loc
//     offsets count from the start of the record (header included);
//     __rel_loc offsets from the end of the u32 itself.
//   - Data that ends past the end of the record is EFAULT.
//   - If the type contains "char", the data's last byte must be NUL, else
//     EFAULT. With length 0 that is the byte just before the data.
//   - There is no lower bound: data may overlap the header or other fields.
//
// The record must hold at least MinSize payload bytes (see CheckSize).
//
// Difference from the kernel: a zero-length __data_loc string at offset 0
// makes the kernel read the byte before the record, which belongs to the
// ring buffer's own event header; Validate takes it as 0.
func (e *Event) Validate(record []byte) error {
	// Inlined into every write: most events have no loc field.
	if !e.hasLoc {
		return nil
	}
	return e.validate(record)
}

func (e *Event) validate(record []byte) error {
	for i := range e.Fields {
		f := &e.Fields[i]
		if f.Kind != DataLoc && f.Kind != RelLoc {
			continue
		}
		if f.Offset < 0 || f.Offset+4 > len(record) {
			return errorf(unix.EFAULT, i+1, f.Name, "the field lies past the record's end (%d bytes)", len(record))
		}
		loc := binary.NativeEndian.Uint32(record[f.Offset:])
		start, end := locSpan(f, loc)
		if end > len(record) {
			return errorf(unix.EFAULT, i+1, f.Name, "%s data at %d, %d bytes long, ends past the record's end (%d bytes)",
				f.Kind, start, end-start, len(record))
		}
		if f.CString && end > 0 && record[end-1] != 0 {
			return errorf(unix.EFAULT, i+1, f.Name, "%s string at %d, %d bytes long, does not end in NUL", f.Kind, start, end-start)
		}
	}
	return nil
}

// locSpan returns where the data of a loc field with value loc starts and
// ends in the record.
func locSpan(f *Field, loc uint32) (start, end int) {
	start = int(loc & 0xffff)
	if f.Kind == RelLoc {
		start += f.Offset + 4
	}
	return start, start + int(loc>>16)
}
