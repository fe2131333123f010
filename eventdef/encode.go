package eventdef

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// An Encoder builds the payload of one record of an event: the bytes a
// program writes after its 4-byte write index. Set the fields in declaration
// order, one call per field, then take Payload. The fixed part of the payload
// comes first (MinSize bytes); the data of __data_loc and __rel_loc fields is
// appended after it in the order the fields are set, with each loc word
// computed as the kernel reads it.
//
// An Encoder reuses the buffer it is given and does not allocate once that
// buffer is large enough. The first error sticks: later calls do nothing and
// Payload returns it. The zero Encoder is ready for Reset.
//
//	var enc eventdef.Encoder
//	enc.Reset(ev, buf[:0])
//	enc.Uint(42)
//	enc.String("hello")
//	payload, err := enc.Payload()
type Encoder struct {
	ev   *Event
	buf  []byte
	next int // index of the next field to set
	err  error
}

// Reset starts a new payload for ev in buf, which is truncated and reused.
func (enc *Encoder) Reset(ev *Event, buf []byte) {
	enc.ev, enc.next, enc.err = ev, 0, nil
	n := max(ev.MinSize, 0)
	if cap(buf) < n {
		buf = make([]byte, n, n+64)
	}
	buf = buf[:n]
	clear(buf)
	enc.buf = buf
}

// field returns the next field to set, or nil after an error.
func (enc *Encoder) field(want string) *Field {
	if enc.err != nil {
		return nil
	}
	if enc.ev == nil {
		enc.err = errorf(unix.EINVAL, 0, "", "encoder used before Reset")
		return nil
	}
	if enc.next >= len(enc.ev.Fields) {
		enc.err = errorf(unix.EINVAL, 0, "", "%s: the event has only %d fields", want, len(enc.ev.Fields))
		return nil
	}
	f := &enc.ev.Fields[enc.next]
	enc.next++
	return f
}

func (enc *Encoder) fail(f *Field, format string, args ...any) {
	e := errorf(unix.EINVAL, enc.next, f.Name, format, args...)
	enc.err = e
}

// at returns the payload bytes of field f.
func (enc *Encoder) at(f *Field) []byte {
	p := f.Offset - HeaderSize
	return enc.buf[p : p+f.Size]
}

// Int sets an integer field. The value must fit the field's size as a signed
// or an unsigned number; the field's own signedness is not enforced, because
// the kernel calls char signed and programs often store bytes in it.
func (enc *Encoder) Int(v int64) {
	f := enc.field("Int")
	if f == nil {
		return
	}
	if f.Kind != Integer {
		enc.fail(f, "Int on a %s field (%s)", f.Kind, f.Type)
		return
	}
	bits := uint(f.Size * 8)
	if bits < 64 && (v < -(1<<(bits-1)) || v >= 1<<bits) {
		enc.fail(f, "%d does not fit %s", v, f.Type)
		return
	}
	putUint(enc.at(f), uint64(v))
}

// Uint sets an integer field; the value must fit the field's size.
func (enc *Encoder) Uint(v uint64) {
	f := enc.field("Uint")
	if f == nil {
		return
	}
	if f.Kind != Integer {
		enc.fail(f, "Uint on a %s field (%s)", f.Kind, f.Type)
		return
	}
	if bits := uint(f.Size * 8); bits < 64 && v >= 1<<bits {
		enc.fail(f, "%d does not fit %s", v, f.Type)
		return
	}
	putUint(enc.at(f), v)
}

func putUint(b []byte, v uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(b, uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(b, uint32(v))
	case 8:
		binary.NativeEndian.PutUint64(b, v)
	}
}

// String sets a text field:
//   - char[N]: s is copied and NUL-padded; it may be at most N bytes (with N
//     bytes there is no terminating NUL, which the kernel's printer allows);
//   - __data_loc / __rel_loc: s is appended after the fixed fields, followed
//     by a NUL if the type contains "char" (the kernel requires it), and the
//     loc word is set to point at it;
//   - struct: s must be exactly the struct's size.
func (enc *Encoder) String(s string) {
	f := enc.field("String")
	if f == nil {
		return
	}
	enc.setBytes(f, s, nil, true)
}

// Bytes sets a field from raw bytes: like String, except that nothing is
// appended to __data_loc / __rel_loc data, so the caller supplies any NUL.
func (enc *Encoder) Bytes(b []byte) {
	f := enc.field("Bytes")
	if f == nil {
		return
	}
	enc.setBytes(f, "", b, false)
}

// setBytes stores s or b (one of them is empty) into f.
func (enc *Encoder) setBytes(f *Field, s string, b []byte, text bool) {
	n := len(s) + len(b)
	switch f.Kind {
	case Array:
		if n > f.Size {
			enc.fail(f, "%d bytes do not fit %s", n, f.Type)
			return
		}
		dst := enc.at(f)
		copy(dst[copy(dst, s):], b)
	case Struct:
		if n != f.Size {
			enc.fail(f, "%s takes exactly %d bytes, not %d", f.Type, f.Size, n)
			return
		}
		dst := enc.at(f)
		copy(dst[copy(dst, s):], b)
	case DataLoc, RelLoc:
		nul := text && f.CString
		size := n
		if nul {
			size++
		}
		start := len(enc.buf) // payload offset of the data
		var off int
		if f.Kind == DataLoc {
			off = start + HeaderSize
		} else {
			off = start - (f.Offset - HeaderSize + 4)
		}
		if off > 0xffff || size > 0xffff {
			enc.err = errorf(unix.E2BIG, enc.next, f.Name, "%s data of %d bytes at offset %d does not fit the 16-bit loc word", f.Kind, size, off)
			return
		}
		enc.buf = append(enc.buf, s...)
		enc.buf = append(enc.buf, b...)
		if nul {
			enc.buf = append(enc.buf, 0)
		}
		binary.NativeEndian.PutUint32(enc.at(f), uint32(size)<<16|uint32(off))
	default:
		enc.fail(f, "text on an integer field (%s)", f.Type)
	}
}

// Payload returns the payload built so far, or the first error. Every field
// must have been set.
func (enc *Encoder) Payload() ([]byte, error) {
	if enc.err != nil {
		return nil, enc.err
	}
	if enc.ev == nil {
		return nil, errorf(unix.EINVAL, 0, "", "encoder used before Reset")
	}
	if enc.next < len(enc.ev.Fields) {
		f := &enc.ev.Fields[enc.next]
		return nil, errorf(unix.EINVAL, enc.next+1, f.Name, "not set: %d of %d fields set", enc.next, len(enc.ev.Fields))
	}
	return enc.buf, nil
}
