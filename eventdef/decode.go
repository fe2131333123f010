package eventdef

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
)

// Value is one decoded field of a record. Its slices alias the record.
type Value struct {
	Field *Field
	// Data is the field's bytes in the record; for __data_loc and __rel_loc
	// fields it is the data the loc word points at (for strings, the NUL
	// included). Nil when Overflow is set.
	Data []byte
	// Loc is the raw loc word of a __data_loc or __rel_loc field.
	Loc uint32
	// Overflow is set when the field, or the data a loc word points at, lies
	// outside the record.
	Overflow bool
}

// Uint returns the value of an integer-sized field (1, 2, 4 or 8 bytes),
// zero-extended.
func (v Value) Uint() uint64 {
	switch len(v.Data) {
	case 1:
		return uint64(v.Data[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(v.Data))
	case 4:
		return uint64(binary.NativeEndian.Uint32(v.Data))
	case 8:
		return binary.NativeEndian.Uint64(v.Data)
	}
	return 0
}

// Int returns the value of an integer-sized field, sign-extended.
func (v Value) Int() int64 {
	switch len(v.Data) {
	case 1:
		return int64(int8(v.Data[0]))
	case 2:
		return int64(int16(binary.NativeEndian.Uint16(v.Data)))
	case 4:
		return int64(int32(binary.NativeEndian.Uint32(v.Data)))
	case 8:
		return int64(binary.NativeEndian.Uint64(v.Data))
	}
	return 0
}

// Text returns Data up to its first NUL: the string of a char[N] field or of
// a string loc field.
func (v Value) Text() []byte {
	if i := bytes.IndexByte(v.Data, 0); i >= 0 {
		return v.Data[:i]
	}
	return v.Data
}

// IsText reports whether the field holds text: char[N] arrays and loc fields
// whose type contains "char".
func (f *Field) IsText() bool { return f.Kind == Array || f.CString }

// Decode appends the values of the record's fields to dst and returns it.
// record is the 8-byte header followed by the payload. Decoding never fails:
// a field that does not fit in the record is marked Overflow.
func (e *Event) Decode(dst []Value, record []byte) []Value {
	base := len(dst)
	dst = slices.Grow(dst, len(e.Fields))[:base+len(e.Fields)]
	out := dst[base:]
	for i := range e.Fields {
		f := &e.Fields[i]
		v := &out[i]
		*v = Value{Field: f}
		if f.Offset < 0 || f.Offset+f.Size > len(record) {
			v.Overflow = true
			continue
		}
		v.Data = record[f.Offset : f.Offset+f.Size]
		if f.Kind == DataLoc || f.Kind == RelLoc {
			v.Loc = binary.NativeEndian.Uint32(v.Data)
			start, end := locSpan(f, v.Loc)
			if end > len(record) {
				v.Data, v.Overflow = nil, true
			} else {
				v.Data = record[start:end]
			}
		}
	}
	return dst
}

// AppendTrace appends the record as the trace file shows it after the ftrace
// line prefix: "<tracepoint>:" and then " <field>=<value>" per field, without
// the final newline (user_event_print_trace → print_event_fields →
// print_fields, kernel/trace/trace_output.c). The printer ignores print fmt
// and prints by filter type and size:
//
//   - char[N] (and any type with '[' and "char"): up to N bytes, to the first NUL;
//   - string loc fields: up to the loc length, to the first NUL;
//   - 1-byte fields: 'c'(n) if the byte is printable (ISO 8859-1), else (n);
//   - 2-byte fields: 0x%x (%d), both unsigned;
//   - 4-byte fields: 0x%x (%d), the second signed, whatever the type's sign;
//     loc fields that are not strings print their bytes as "%02x,%02x…";
//   - 8-byte fields: 0x%llx (%lld);
//   - any other size: <INVALID-SIZE>; a field or data past the record's end:
//     <OVERFLOW>; "__data_loc cpumask_t" fields: <INVALID-TYPE>;
//   - an event without fields: "<tracepoint>:No fields found".
//
// Bytes are copied as they are; the kernel does not escape them either.
func (e *Event) AppendTrace(dst []byte, tracepoint string, record []byte) []byte {
	dst = append(dst, tracepoint...)
	dst = append(dst, ':')
	if len(e.Fields) == 0 {
		return append(dst, "No fields found"...)
	}
	for i := range e.Fields {
		f := &e.Fields[i]
		dst = append(dst, f.label...)
		dst = appendFieldValue(dst, f, record)
	}
	return dst
}

const overflow = "<OVERFLOW>"

func appendFieldValue(dst []byte, f *Field, record []byte) []byte {
	if f.Offset < 0 || f.Offset+f.Size > len(record) {
		return append(dst, overflow...)
	}
	pos := record[f.Offset : f.Offset+f.Size]
	switch f.show {
	case showStatic:
		return appendCString(dst, pos)
	case showDynString:
		start, n := locSigned(f, pos)
		if start+n > len(record) || start > len(record) {
			return append(dst, overflow...)
		}
		if n < 0 { // a negative precision prints to the NUL
			return appendCString(dst, record[start:])
		}
		return appendCString(dst, record[start:start+n])
	case showByte:
		c := pos[0]
		if isPrint(c) {
			dst = append(dst, '\'', c, '\'')
		}
		dst = append(dst, '(')
		dst = strconv.AppendUint(dst, uint64(c), 10)
		return append(dst, ')')
	case showShort:
		v := binary.NativeEndian.Uint16(pos)
		dst = append(dst, "0x"...)
		dst = strconv.AppendUint(dst, uint64(v), 16)
		dst = append(dst, " ("...)
		dst = strconv.AppendUint(dst, uint64(v), 10)
		return append(dst, ')')
	case showInt:
		v := binary.NativeEndian.Uint32(pos)
		dst = append(dst, "0x"...)
		dst = strconv.AppendUint(dst, uint64(v), 16)
		dst = append(dst, " ("...)
		dst = strconv.AppendInt(dst, int64(int32(v)), 10)
		return append(dst, ')')
	case showArray:
		return appendArray(dst, f, pos, record)
	case showLong:
		v := binary.NativeEndian.Uint64(pos)
		dst = append(dst, "0x"...)
		dst = strconv.AppendUint(dst, v, 16)
		dst = append(dst, " ("...)
		dst = strconv.AppendInt(dst, int64(v), 10)
		return append(dst, ')')
	case showInvalidSize:
		return append(dst, "<INVALID-SIZE>"...)
	}
	return append(dst, "<INVALID-TYPE>"...)
}

// locSigned reads a loc word as print_fields does: offset from the low 16
// bits, length from an arithmetic shift of the word as an int.
func locSigned(f *Field, pos []byte) (start, n int) {
	loc := int32(binary.NativeEndian.Uint32(pos))
	start = int(loc & 0xffff)
	if f.Kind == RelLoc {
		start += f.Offset + 4
	}
	return start, int(loc >> 16)
}

// appendArray is print_array: the bytes of a non-string loc field in hex,
// separated by commas.
func appendArray(dst []byte, f *Field, pos, record []byte) []byte {
	start, n := locSigned(f, pos)
	if start+n > len(record) || start > len(record) {
		return append(dst, overflow...)
	}
	const hex = "0123456789abcdef"
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		c := record[start+i]
		dst = append(dst, hex[c>>4], hex[c&15])
	}
	return dst
}

// appendCString is "%.*s": b up to its first NUL.
func appendCString(dst, b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return append(dst, b...)
}
