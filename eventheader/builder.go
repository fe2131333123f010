package eventheader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// ErrBuild reports an event the builder cannot write: a definition the
// format does not allow, or metadata beyond 65535 bytes.
var ErrBuild = errors.New("eventheader: cannot build event")

// Builder writes EventHeader events: Reset with the event name and header,
// define fields and append their values, then AppendEvent into the
// caller's buffer. A Builder reuses its own two scratch buffers (metadata
// and data), so after the first events it does not allocate. It writes
// little-endian events with the host's pointer size (the only kind
// user_events on a little-endian host needs); not safe for concurrent use.
//
// Field definitions and values are written separately because the format
// keeps them apart: a definition (Field, ArrayField, StructField) goes to
// the metadata once, values go to the data — once for a scalar, once per
// element for an array, and for an array of structs the struct's fields
// are defined once (for its first element) and their values appended for
// every element. The Add methods do both for a scalar.
type Builder struct {
	meta     []byte
	data     []byte
	header   Header
	activity [32]byte
	actLen   int
	err      error
}

// defaultFlags are the flags of events this host writes.
var defaultFlags = FlagLittleEndian | FlagExtension | func() Flags {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		return FlagPointer64
	}
	return 0
}()

// Reset starts an event named name ("name" or "name;attr=value", no NUL)
// with header h. h.Flags is ignored: the builder sets them.
func (b *Builder) Reset(name string, h Header) {
	b.meta = append(append(b.meta[:0], name...), 0)
	b.data = b.data[:0]
	b.header = h
	b.actLen = 0
	b.err = nil
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			b.fail("event name %q holds a NUL", name)
		}
	}
}

// SetActivityID adds the activity id extension: id, and related (the
// parent activity, usually only on an activity-start event) unless nil.
func (b *Builder) SetActivityID(id *[16]byte, related *[16]byte) {
	copy(b.activity[:16], id[:])
	b.actLen = 16
	if related != nil {
		copy(b.activity[16:], related[:])
		b.actLen = 32
	}
}

func (b *Builder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%w: "+format, append([]any{ErrBuild}, args...)...)
	}
}

// Err returns the first error of the event being built.
func (b *Builder) Err() error { return b.err }

// def writes a definition; it returns the index of its encoding byte.
// With value, enc must be a value encoding and f a value format: what is
// wrong is reported, and the flags are dropped.
func (b *Builder) def(name string, enc Encoding, f Format, tag uint16, value bool) int {
	// One comparison for each: enc is EncodingStruct+1 .. EncodingMax-1
	// without flags (which lie above EncodingMax), f has no chain bit.
	if value && (uint8(enc)-uint8(EncodingStruct+1) >= uint8(EncodingMax-EncodingStruct-1) || f&^FormatValueMask != 0) {
		b.badValueDef(name, enc, f)
		enc, f = enc&EncodingValueMask, f&FormatValueMask
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			b.fail("field name %q holds a NUL", name)
		}
	}
	// Appended to a local slice, stored once: b.meta is in memory, and
	// each append to it would store it back.
	m := append(b.meta, name...)
	m = append(m, 0)
	at := len(m)
	if tag != 0 {
		m = append(m, byte(enc|EncodingChain), byte(f|FormatChain), byte(tag), byte(tag>>8))
	} else if f != 0 {
		m = append(m, byte(enc|EncodingChain), byte(f))
	} else {
		m = append(m, byte(enc))
	}
	b.meta = m
	return at
}

// Checked at compile time (a negative constant does not convert): the
// encoding flags lie at or above EncodingMax, so def's range check
// excludes them as the value mask does.
const _ = uint8(EncodingValueMask + 1 - EncodingMax)

func (b *Builder) badValueDef(name string, enc Encoding, f Format) {
	if enc&^EncodingValueMask != 0 || enc == EncodingInvalid || enc == EncodingStruct || enc >= EncodingMax {
		b.fail("field %q: encoding %v is not a value encoding", name, enc)
	}
	if f&^FormatValueMask != 0 {
		b.fail("field %q: format %#x has the chain bit", name, uint8(f))
	}
}

func (b *Builder) valueDef(name string, enc Encoding, f Format, tag uint16) int {
	return b.def(name, enc, f, tag, true)
}

// Field defines a scalar field: enc is a value encoding (not struct, no
// flags), f its format (FormatDefault for the encoding's default), tag a
// provider-defined 16-bit value or 0. Append its value next.
func (b *Builder) Field(name string, enc Encoding, f Format, tag uint16) {
	b.valueDef(name, enc, f, tag)
}

// ArrayField defines an array of enc values: of constant length count
// (1..65535, in the metadata), or, if count is 0, of variable length (its
// count appended with AppendCount before the elements).
func (b *Builder) ArrayField(name string, enc Encoding, f Format, tag uint16, count uint16) {
	b.arrayFlag(b.valueDef(name, enc, f, tag), count)
}

func (b *Builder) arrayFlag(at int, count uint16) {
	if count == 0 {
		b.meta[at] |= byte(EncodingVArray)
		return
	}
	b.meta[at] |= byte(EncodingCArray)
	b.meta = binary.LittleEndian.AppendUint16(b.meta, count)
}

// StructField defines a struct of the next fieldCount (1..127) fields.
func (b *Builder) StructField(name string, fieldCount int, tag uint16) {
	b.structDef(name, fieldCount, tag)
}

// StructArrayField defines an array of structs of the next fieldCount
// (1..127) fields: constant length count, or variable if count is 0.
// Define the struct's fields once, then append every element's values.
func (b *Builder) StructArrayField(name string, fieldCount int, tag uint16, count uint16) {
	b.arrayFlag(b.structDef(name, fieldCount, tag), count)
}

func (b *Builder) structDef(name string, n int, tag uint16) int {
	if n < 1 || n > 127 {
		b.fail("struct %q: %d fields, must be 1..127", name, n)
		n = 1
	}
	return b.def(name, EncodingStruct, Format(n), tag, false)
}

// AppendMetadata appends raw field definitions (for re-encoding).
func (b *Builder) AppendMetadata(defs []byte) { b.meta = append(b.meta, defs...) }

// AppendCount appends a variable-length array's element count.
func (b *Builder) AppendCount(n uint16) { b.data = binary.LittleEndian.AppendUint16(b.data, n) }

// AppendValue8 .. AppendValue64 append a fixed-size value.
func (b *Builder) AppendValue8(v uint8)   { b.data = append(b.data, v) }
func (b *Builder) AppendValue16(v uint16) { b.data = binary.LittleEndian.AppendUint16(b.data, v) }
func (b *Builder) AppendValue32(v uint32) { b.data = binary.LittleEndian.AppendUint32(b.data, v) }
func (b *Builder) AppendValue64(v uint64) { b.data = binary.LittleEndian.AppendUint64(b.data, v) }

// AppendRaw appends bytes as they are: a fixed-size value already in
// little-endian (or, for UUID, port and IP formats, network) order.
func (b *Builder) AppendRaw(p []byte) { b.data = append(b.data, p...) }

// AppendZString appends a NUL-terminated string of enc's character size
// (zstring_char8/16/32): units are its characters' bytes, little-endian,
// without the terminator. Units holding a NUL character end the string
// early for a decoder, so they are refused.
func (b *Builder) AppendZString(enc Encoding, units []byte) {
	cs := enc.CharSize()
	if cs == 0 || len(units)%cs != 0 {
		b.fail("%d bytes are not %v characters", len(units), enc)
		return
	}
	for i := 0; i < len(units); i += cs {
		z := true
		for _, c := range units[i : i+cs] {
			z = z && c == 0
		}
		if z {
			b.fail("a %v string cannot hold a NUL character (at byte %d)", enc, i)
			return
		}
	}
	b.data = append(b.data, units...)
	for range cs {
		b.data = append(b.data, 0)
	}
}

// AppendCounted appends a counted string or binary (string_length16_charN,
// binary_length16_char8): a u16 count of characters, then units.
func (b *Builder) AppendCounted(enc Encoding, units []byte) {
	cs := enc.CharSize()
	if cs == 0 || len(units)%cs != 0 || len(units)/cs > math.MaxUint16 {
		b.fail("%d bytes are not a counted %v value (at most 65535 characters)", len(units), enc)
		return
	}
	b.data = binary.LittleEndian.AppendUint16(b.data, uint16(len(units)/cs))
	b.data = append(b.data, units...)
}

// AppendString8 appends a counted 8-bit string from a Go string.
func (b *Builder) AppendString8(s string) {
	if len(s) > math.MaxUint16 {
		b.fail("string of %d bytes, at most 65535", len(s))
		return
	}
	d := binary.LittleEndian.AppendUint16(b.data, uint16(len(s)))
	b.data = append(d, s...)
}

// The Add methods define a scalar field and append its value.

// AddUint8 adds a value8 field (format e.g. FormatDefault, FormatSignedInt,
// FormatHexInt, FormatBoolean, FormatString8).
func (b *Builder) AddUint8(name string, v uint8, f Format, tag uint16) {
	b.valueDef(name, EncodingValue8, f, tag)
	b.AppendValue8(v)
}

// AddUint16 adds a value16 field (FormatStringUTF for a UTF-16 unit; for
// FormatPort use AddPort).
func (b *Builder) AddUint16(name string, v uint16, f Format, tag uint16) {
	b.valueDef(name, EncodingValue16, f, tag)
	b.AppendValue16(v)
}

// AddUint32 adds a value32 field (FormatErrno, FormatPid, FormatTime,
// FormatBoolean, FormatStringUTF for a code point, ...).
func (b *Builder) AddUint32(name string, v uint32, f Format, tag uint16) {
	b.valueDef(name, EncodingValue32, f, tag)
	b.AppendValue32(v)
}

// AddUint64 adds a value64 field (FormatSignedInt, FormatHexInt, FormatTime, ...).
func (b *Builder) AddUint64(name string, v uint64, f Format, tag uint16) {
	b.valueDef(name, EncodingValue64, f, tag)
	b.AppendValue64(v)
}

// AddInt64 adds a signed value64 field.
func (b *Builder) AddInt64(name string, v int64, tag uint16) {
	b.AddUint64(name, uint64(v), FormatSignedInt, tag)
}

// AddInt32 adds a signed value32 field.
func (b *Builder) AddInt32(name string, v int32, tag uint16) {
	b.AddUint32(name, uint32(v), FormatSignedInt, tag)
}

// AddFloat32 and AddFloat64 add float fields.
func (b *Builder) AddFloat32(name string, v float32, tag uint16) {
	b.AddUint32(name, math.Float32bits(v), FormatFloat, tag)
}
func (b *Builder) AddFloat64(name string, v float64, tag uint16) {
	b.AddUint64(name, math.Float64bits(v), FormatFloat, tag)
}

// AddBool adds a boolean as value8.
func (b *Builder) AddBool(name string, v bool, tag uint16) {
	var u uint8
	if v {
		u = 1
	}
	b.AddUint8(name, u, FormatBoolean, tag)
}

// AddPort adds an IP port (value16 in network byte order).
func (b *Builder) AddPort(name string, port uint16, tag uint16) {
	b.valueDef(name, EncodingValue16, FormatPort, tag)
	b.data = binary.BigEndian.AppendUint16(b.data, port)
}

// AddIPv4 adds an IPv4 address (value32, network byte order).
func (b *Builder) AddIPv4(name string, addr [4]byte, tag uint16) {
	b.valueDef(name, EncodingValue32, FormatIPAddress, tag)
	b.data = append(b.data, addr[:]...)
}

// AddIPv6 adds an IPv6 address (value128, network byte order).
func (b *Builder) AddIPv6(name string, addr [16]byte, tag uint16) {
	b.valueDef(name, EncodingValue128, FormatIPAddress, tag)
	b.data = append(b.data, addr[:]...)
}

// AddUUID adds a UUID (value128, RFC 4122 byte order).
func (b *Builder) AddUUID(name string, id [16]byte, tag uint16) {
	b.valueDef(name, EncodingValue128, FormatUUID, tag)
	b.data = append(b.data, id[:]...)
}

// AddString adds a counted 8-bit string (string_length16_char8) with
// format f (FormatDefault is UTF-8; FormatString8, FormatStringJSON,
// FormatStringXML, FormatStringUTFBOM ...).
func (b *Builder) AddString(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingStringLength16Char8, f, tag)
	b.AppendString8(s)
}

// AddZString adds a NUL-terminated 8-bit string (zstring_char8); s must not
// hold a NUL.
func (b *Builder) AddZString(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingZStringChar8, f, tag)
	if b.checkNoNUL(name, s) {
		b.data = append(b.data, s...)
		b.data = append(b.data, 0)
	}
}

// AddBinary adds counted bytes (binary_length16_char8, hex bytes by default).
func (b *Builder) AddBinary(name string, p []byte, f Format, tag uint16) {
	b.valueDef(name, EncodingBinaryLength16Char8, f, tag)
	b.AppendCounted(EncodingBinaryLength16Char8, p)
}

// AppendEvent appends the event — header, activity id extension if set,
// metadata extension, data — to dst. It does not allocate when dst has room.
func (b *Builder) AppendEvent(dst []byte) ([]byte, error) {
	dst, meta, data, err := b.Parts(dst)
	if err != nil {
		return dst, err
	}
	dst = append(dst, meta...)
	return append(dst, data...), nil
}

// Parts is the event AppendEvent writes, in three pieces for a writev
// without a copy: prefix — the header, the activity id extension and the
// metadata extension's own header — appended to dst, then the metadata
// and the values as the Builder holds them (valid until its next Reset or
// Add).
func (b *Builder) Parts(dst []byte) (prefix, meta, data []byte, err error) {
	if b.err != nil {
		return dst, nil, nil, b.err
	}
	if len(b.meta) > math.MaxUint16 {
		return dst, nil, nil, fmt.Errorf("%w: metadata of %d bytes, at most 65535: fewer or shorter field names", ErrBuild, len(b.meta))
	}
	h := &b.header
	dst = append(dst, byte(defaultFlags), h.Version)
	dst = binary.LittleEndian.AppendUint16(dst, h.ID)
	dst = binary.LittleEndian.AppendUint16(dst, h.Tag)
	dst = append(dst, byte(h.Opcode), byte(h.Level))
	if b.actLen != 0 {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(b.actLen))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(ExtensionActivityID|ExtensionChain))
		dst = append(dst, b.activity[:b.actLen]...)
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(b.meta)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(ExtensionMetadata))
	return dst, b.meta, b.data, nil
}

// appendUTF16 appends s, UTF-8, as little-endian UTF-16 units; it returns
// the number of units. Invalid UTF-8 becomes U+FFFD.
func (b *Builder) appendUTF16(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			b.data = binary.LittleEndian.AppendUint16(b.data, uint16(0xd800+(r>>10)))
			b.data = binary.LittleEndian.AppendUint16(b.data, uint16(0xdc00+(r&0x3ff)))
			n += 2
			continue
		}
		b.data = binary.LittleEndian.AppendUint16(b.data, uint16(r))
		n++
	}
	return n
}

func (b *Builder) appendUTF32(s string) int {
	n := 0
	for _, r := range s {
		b.data = binary.LittleEndian.AppendUint32(b.data, uint32(r))
		n++
	}
	return n
}

// AddString16 adds s, converted to UTF-16, as a counted 16-bit string
// (string_length16_char16).
func (b *Builder) AddString16(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingStringLength16Char16, f, tag)
	at := len(b.data)
	b.data = append(b.data, 0, 0)
	n := b.appendUTF16(s)
	if n > math.MaxUint16 {
		b.fail("field %q: %d UTF-16 units, at most 65535", name, n)
	}
	binary.LittleEndian.PutUint16(b.data[at:], uint16(n))
}

// AddString32 adds s, converted to UTF-32, as a counted 32-bit string
// (string_length16_char32).
func (b *Builder) AddString32(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingStringLength16Char32, f, tag)
	at := len(b.data)
	b.data = append(b.data, 0, 0)
	n := b.appendUTF32(s)
	if n > math.MaxUint16 {
		b.fail("field %q: %d characters, at most 65535", name, n)
	}
	binary.LittleEndian.PutUint16(b.data[at:], uint16(n))
}

// AddZString16 adds s, converted to UTF-16, NUL-terminated
// (zstring_char16); s must not hold a NUL.
func (b *Builder) AddZString16(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingZStringChar16, f, tag)
	if b.checkNoNUL(name, s) {
		b.appendUTF16(s)
		b.data = append(b.data, 0, 0)
	}
}

// AddZString32 adds s, converted to UTF-32, NUL-terminated
// (zstring_char32); s must not hold a NUL.
func (b *Builder) AddZString32(name string, s string, f Format, tag uint16) {
	b.valueDef(name, EncodingZStringChar32, f, tag)
	if b.checkNoNUL(name, s) {
		b.appendUTF32(s)
		b.data = append(b.data, 0, 0, 0, 0)
	}
}

func (b *Builder) checkNoNUL(name, s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b.fail("zstring field %q holds a NUL at %d", name, i)
			return false
		}
	}
	return true
}
