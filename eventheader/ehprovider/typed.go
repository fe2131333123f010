package ehprovider

//go:generate go run ../../internal/gentyped/gentyped.go -pkg ehprovider -o typedn.go

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/uetrace/uetrace/eventheader"
)

// Value is what a typed event's field can be. Each type has its encoding
// and format: bool is value8 boolean; intN signed and uintN unsigned
// value8..value64 (int, uint and uintptr 64 bits); float32 and float64
// value32 and value64 float; string a counted UTF-8 string
// (string_length16_char8); []byte counted binary shown as hex. A string or
// []byte beyond 65535 bytes is cut there, as the format's count is 16 bits.
// The types below say how a value is shown: Hex32 and Hex64 as hex,
// Errno as an errno, PID as a process id, UUID as a UUID; a time.Time is
// value64 seconds since 1970 (FormatTime, the format's resolution).
//
// A slice of any of these but byte is a variable-length array of it
// (the encoding's VArray flag): a u16 count, then the elements as a
// scalar of that type is written — a string element a counted string.
// A slice beyond 65535 elements is cut there, as the count is 16 bits.
// []byte is counted binary, not an array; an array of uint8 is the
// Builder's (ArrayField).
//
// A write whose values take more than 256 bytes allocates once.
// Other named types are not matched by their underlying type: convert them.
type Value interface {
	bool | int8 | int16 | int32 | int64 | int |
		uint8 | uint16 | uint32 | uint64 | uint | uintptr |
		float32 | float64 | string | []byte |
		Hex32 | Hex64 | Errno | PID | UUID | time.Time |
		[]bool | []int8 | []int16 | []int32 | []int64 | []int |
		[]uint16 | []uint32 | []uint64 | []uint | []uintptr |
		[]float32 | []float64 | []string |
		[]Hex32 | []Hex64 | []Errno | []PID | []UUID | []time.Time
}

// Hex32 and Hex64 are integers shown in hex (FormatHexInt).
type (
	Hex32 uint32
	Hex64 uint64
)

// Errno is an errno value (value32, FormatErrno), shown by decoders as
// its name, e.g. ENOENT(2).
type Errno int32

// PID is a process or thread id (value32, FormatPid).
type PID int32

// UUID is a UUID in RFC 4122 byte order (value128, FormatUUID).
type UUID [16]byte

// fieldDef is a typed field's definition: its name, encoding and format,
// and whether it is a variable-length array of them.
type fieldDef struct {
	name  string
	enc   eventheader.Encoding
	f     eventheader.Format
	array bool
}

func def[T Value](name string) fieldDef {
	enc, f, array := encodingOf[T]()
	return fieldDef{name, enc, f, array}
}

// encodingOf is T's encoding and format, and whether T is an array.
func encodingOf[T Value]() (eventheader.Encoding, eventheader.Format, bool) {
	var zero T
	switch any(zero).(type) {
	case bool:
		return eventheader.EncodingValue8, eventheader.FormatBoolean, false
	case int8:
		return eventheader.EncodingValue8, eventheader.FormatSignedInt, false
	case int16:
		return eventheader.EncodingValue16, eventheader.FormatSignedInt, false
	case int32:
		return eventheader.EncodingValue32, eventheader.FormatSignedInt, false
	case int64, int:
		return eventheader.EncodingValue64, eventheader.FormatSignedInt, false
	case uint8:
		return eventheader.EncodingValue8, eventheader.FormatDefault, false
	case uint16:
		return eventheader.EncodingValue16, eventheader.FormatDefault, false
	case uint32:
		return eventheader.EncodingValue32, eventheader.FormatDefault, false
	case uint64, uint, uintptr:
		return eventheader.EncodingValue64, eventheader.FormatDefault, false
	case float32:
		return eventheader.EncodingValue32, eventheader.FormatFloat, false
	case float64:
		return eventheader.EncodingValue64, eventheader.FormatFloat, false
	case string:
		return eventheader.EncodingStringLength16Char8, eventheader.FormatDefault, false
	case []byte:
		return eventheader.EncodingBinaryLength16Char8, eventheader.FormatDefault, false
	case Hex32:
		return eventheader.EncodingValue32, eventheader.FormatHexInt, false
	case Hex64:
		return eventheader.EncodingValue64, eventheader.FormatHexInt, false
	case Errno:
		return eventheader.EncodingValue32, eventheader.FormatErrno, false
	case PID:
		return eventheader.EncodingValue32, eventheader.FormatPid, false
	case UUID:
		return eventheader.EncodingValue128, eventheader.FormatUUID, false
	case time.Time:
		return eventheader.EncodingValue64, eventheader.FormatTime, false
	case []bool:
		e, f, _ := encodingOf[bool]()
		return e, f, true
	case []int8:
		e, f, _ := encodingOf[int8]()
		return e, f, true
	case []int16:
		e, f, _ := encodingOf[int16]()
		return e, f, true
	case []int32:
		e, f, _ := encodingOf[int32]()
		return e, f, true
	case []int64:
		e, f, _ := encodingOf[int64]()
		return e, f, true
	case []int:
		e, f, _ := encodingOf[int]()
		return e, f, true
	case []uint16:
		e, f, _ := encodingOf[uint16]()
		return e, f, true
	case []uint32:
		e, f, _ := encodingOf[uint32]()
		return e, f, true
	case []uint64:
		e, f, _ := encodingOf[uint64]()
		return e, f, true
	case []uint:
		e, f, _ := encodingOf[uint]()
		return e, f, true
	case []uintptr:
		e, f, _ := encodingOf[uintptr]()
		return e, f, true
	case []float32:
		e, f, _ := encodingOf[float32]()
		return e, f, true
	case []float64:
		e, f, _ := encodingOf[float64]()
		return e, f, true
	case []string:
		e, f, _ := encodingOf[string]()
		return e, f, true
	case []Hex32:
		e, f, _ := encodingOf[Hex32]()
		return e, f, true
	case []Hex64:
		e, f, _ := encodingOf[Hex64]()
		return e, f, true
	case []Errno:
		e, f, _ := encodingOf[Errno]()
		return e, f, true
	case []PID:
		e, f, _ := encodingOf[PID]()
		return e, f, true
	case []UUID:
		e, f, _ := encodingOf[UUID]()
		return e, f, true
	default: // []time.Time
		e, f, _ := encodingOf[time.Time]()
		return e, f, true
	}
}

var le = binary.LittleEndian

// hostLE says the host is little-endian: the format's byte order is then
// the memory's, and arrays of fixed-size values are copied as they lie.
// A variable, so that tests take the other path too.
var hostLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// appendValue appends v's bytes as encodingOf[T] says.
func appendValue[T Value](dst []byte, v T) []byte {
	switch v := any(v).(type) {
	case bool:
		return appendBool(dst, v)
	case int8:
		return append(dst, byte(v))
	case int16:
		return le.AppendUint16(dst, uint16(v))
	case int32:
		return le.AppendUint32(dst, uint32(v))
	case int64:
		return le.AppendUint64(dst, uint64(v))
	case int:
		return le.AppendUint64(dst, uint64(v))
	case uint8:
		return append(dst, v)
	case uint16:
		return le.AppendUint16(dst, v)
	case uint32:
		return le.AppendUint32(dst, v)
	case uint64:
		return le.AppendUint64(dst, v)
	case uint:
		return le.AppendUint64(dst, uint64(v))
	case uintptr:
		return le.AppendUint64(dst, uint64(v))
	case float32:
		return le.AppendUint32(dst, math.Float32bits(v))
	case float64:
		return le.AppendUint64(dst, math.Float64bits(v))
	case string:
		return appendString(dst, v)
	case []byte:
		if len(v) > math.MaxUint16 {
			v = v[:math.MaxUint16]
		}
		dst = le.AppendUint16(dst, uint16(len(v)))
		return append(dst, v...)
	case Hex32:
		return le.AppendUint32(dst, uint32(v))
	case Hex64:
		return le.AppendUint64(dst, uint64(v))
	case Errno:
		return le.AppendUint32(dst, uint32(v))
	case PID:
		return le.AppendUint32(dst, uint32(v))
	case UUID:
		return append(dst, v[:]...)
	case time.Time:
		return le.AppendUint64(dst, uint64(v.Unix()))
	case []bool:
		return appendFixed(dst, v)
	case []int8:
		return appendFixed(dst, v)
	case []int16:
		return appendFixed(dst, v)
	case []int32:
		return appendFixed(dst, v)
	case []int64:
		return appendFixed(dst, v)
	case []int:
		return appendWord(dst, v)
	case []uint16:
		return appendFixed(dst, v)
	case []uint32:
		return appendFixed(dst, v)
	case []uint64:
		return appendFixed(dst, v)
	case []uint:
		return appendWord(dst, v)
	case []uintptr:
		return appendWord(dst, v)
	case []float32:
		return appendFixed(dst, v)
	case []float64:
		return appendFixed(dst, v)
	case []Hex32:
		return appendFixed(dst, v)
	case []Hex64:
		return appendFixed(dst, v)
	case []Errno:
		return appendFixed(dst, v)
	case []PID:
		return appendFixed(dst, v)
	case []UUID:
		return appendFixed(dst, v)
	case []string:
		v = v[:arrayLen(len(v))]
		dst = le.AppendUint16(dst, uint16(len(v)))
		for _, s := range v {
			dst = appendString(dst, s)
		}
		return dst
	case []time.Time:
		v = v[:arrayLen(len(v))]
		dst = le.AppendUint16(dst, uint16(len(v)))
		for _, t := range v {
			dst = le.AppendUint64(dst, uint64(t.Unix()))
		}
		return dst
	}
	return dst
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendString appends a counted string, cut at 65535 bytes.
func appendString(dst []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	dst = le.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// arrayLen is the number of elements of an n-element slice that an array
// holds: all of them up to the count's 65535.
func arrayLen(n int) int { return min(n, math.MaxUint16) }

// appendWord appends an array of int, uint or uintptr: value64 whatever
// their size, so widened one by one where they are 32 bits.
func appendWord[E ~int | ~uint | ~uintptr](dst []byte, s []E) []byte {
	var zero E
	if unsafe.Sizeof(zero) == 8 {
		return appendFixed(dst, s)
	}
	return appendWidened(dst, s)
}

// appendWidened appends an array of int, uint or uintptr as value64s,
// one by one.
func appendWidened[E ~int | ~uint | ~uintptr](dst []byte, s []E) []byte {
	s = s[:arrayLen(len(s))]
	dst = le.AppendUint16(dst, uint16(len(s)))
	for _, v := range s {
		dst = le.AppendUint64(dst, uint64(v))
	}
	return dst
}

// fixed are the element types of arrays whose values are their memory in
// the host's byte order: integers, floats, bools (Go keeps them 0 or 1)
// and UUIDs (bytes).
type fixed interface {
	~bool | ~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~[16]byte
}

// appendFixed appends a variable-length array of fixed-size values: the
// count, then on a little-endian host the elements' memory in one copy;
// on another, each element's bytes in little-endian order.
func appendFixed[E fixed](dst []byte, s []E) []byte {
	s = s[:arrayLen(len(s))]
	dst = le.AppendUint16(dst, uint16(len(s)))
	if len(s) == 0 {
		return dst
	}
	size := int(unsafe.Sizeof(s[0]))
	if hostLE {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size)...)
	}
	for i := range s {
		p := unsafe.Pointer(&s[i])
		switch size {
		case 2:
			dst = le.AppendUint16(dst, *(*uint16)(p))
		case 4:
			dst = le.AppendUint32(dst, *(*uint32)(p))
		case 8:
			dst = le.AppendUint64(dst, *(*uint64)(p))
		default: // bytes: bool, int8, UUID
			dst = append(dst, unsafe.Slice((*byte)(p), size)...)
		}
	}
	return dst
}

// typed is what every typed event holds: its tracepoint and the bytes
// that do not change between writes — header, metadata extension — built
// once at definition.
type typed struct {
	tp     *Tracepoint
	prefix []byte
	err    error
}

// stackData is the room for a typed event's values on the writer's stack:
// a write whose values take more (long strings, []byte or arrays)
// allocates their buffer.
const stackData = 256

// activityMax is the room for the activity id extension: its block
// header, the activity id and the related activity id.
const activityMax = 4 + 16 + 16

// eventConfig is what EventOptions set.
type eventConfig struct {
	h       eventheader.Header
	structs []structSpan
}

// EventOption sets a typed event's header — its id and version, opcode
// or tag; the level is the tracepoint's — or groups its fields in structs.
type EventOption func(*eventConfig)

// WithID gives the event a stable id and the version of its layout.
func WithID(id uint16, version uint8) EventOption {
	return func(c *eventConfig) { c.h.ID, c.h.Version = id, version }
}

// WithOpcode gives the event an opcode, e.g. eventheader.OpcodeActivityStart
// (written with WriteActivity, as the format wants an activity id there).
func WithOpcode(op eventheader.Opcode) EventOption {
	return func(c *eventConfig) { c.h.Opcode = op }
}

// WithTag gives the event a provider-defined 16-bit tag.
func WithTag(tag uint16) EventOption {
	return func(c *eventConfig) { c.h.Tag = tag }
}

// WithStruct groups n of the event's fields, from the first-th (counted
// from 0 in Define's order), in a struct named name: decoders show them
// nested, {"name": {"a": 1, "b": 2}}. Structs nest — a struct's fields may
// hold another struct — but do not overlap otherwise. A struct is only
// metadata: the write is the same, as fast. Arrays of structs are the
// Builder's (StructArrayField). A range outside the event's fields, or
// two structs that overlap, make Err say so, and the event unwritable.
func WithStruct(name string, first, n int) EventOption {
	return func(c *eventConfig) { c.structs = append(c.structs, structSpan{name: name, first: first, n: n}) }
}

// structSpan is a struct of fields first..first+n-1; children is the
// number of its direct fields, a nested struct counting one.
type structSpan struct {
	name     string
	first, n int
	children int
}

// nest sorts the structs in metadata order — by first field, outer before
// inner — checks that they nest within nfields fields, and counts each
// one's direct fields.
func nest(spans []structSpan, nfields int) error {
	slices.SortStableFunc(spans, func(a, b structSpan) int {
		if a.first != b.first {
			return a.first - b.first
		}
		return b.n - a.n
	})
	var open []*structSpan
	for i := range spans {
		s := &spans[i]
		if s.n < 1 || s.first < 0 || s.first+s.n > nfields {
			return fmt.Errorf("%w: struct %q of fields %d..%d: the event has fields 0..%d", eventheader.ErrBuild, s.name, s.first, s.first+s.n-1, nfields-1)
		}
		s.children = s.n
		for len(open) > 0 && open[len(open)-1].first+open[len(open)-1].n <= s.first {
			open = open[:len(open)-1]
		}
		if len(open) > 0 {
			parent := open[len(open)-1]
			if s.first+s.n > parent.first+parent.n {
				return fmt.Errorf("%w: struct %q of fields %d..%d overlaps struct %q of fields %d..%d: structs nest or are apart", eventheader.ErrBuild,
					s.name, s.first, s.first+s.n-1, parent.name, parent.first, parent.first+parent.n-1)
			}
			parent.children -= s.n - 1
		}
		open = append(open, s)
	}
	return nil
}

func define(p *Provider, name string, level eventheader.Level, keyword uint64, opts []EventOption, fields ...fieldDef) typed {
	t := typed{tp: p.Tracepoint(level, keyword)}
	var c eventConfig
	for _, o := range opts {
		o(&c)
	}
	c.h.Level = level
	err := nest(c.structs, len(fields))
	if err == nil {
		var b eventheader.Builder
		b.Reset(name, c.h)
		s := c.structs
		for i, fd := range fields {
			for ; len(s) > 0 && s[0].first == i; s = s[1:] {
				b.StructField(s[0].name, s[0].children, 0)
			}
			if fd.array {
				b.ArrayField(fd.name, fd.enc, fd.f, 0, 0)
			} else {
				b.Field(fd.name, fd.enc, fd.f, 0)
			}
		}
		t.prefix, err = b.AppendEvent(nil)
	}
	if err != nil {
		t.err = fmt.Errorf("ehprovider: define %s: %w", name, err)
		t.prefix = nil
	}
	return t
}

// Enabled reports whether the event's tracepoint is enabled.
func (t *typed) Enabled() bool { return t.tp.Enabled() }

// Tracepoint is the tracepoint the event is written to.
func (t *typed) Tracepoint() *Tracepoint { return t.tp }

// Err says why the event cannot be written — its definition, or its
// tracepoint's registration — or nil.
func (t *typed) Err() error {
	if t.err != nil {
		return t.err
	}
	return t.tp.err
}

// appendActivity appends the activity id extension block (chained: the
// metadata follows) when id is not nil.
func appendActivity(dst []byte, id, related *[16]byte) []byte {
	if id == nil {
		return dst
	}
	size := 16
	if related != nil {
		size = 32
	}
	dst = le.AppendUint16(dst, uint16(size))
	dst = le.AppendUint16(dst, uint16(eventheader.ExtensionActivityID|eventheader.ExtensionChain))
	dst = append(dst, id[:]...)
	if related != nil {
		dst = append(dst, related[:]...)
	}
	return dst
}

// write writes the event: the header, the activity extension act if any,
// the metadata extension, the values data — one writev, no copy.
func (t *typed) write(act, data []byte) error {
	if t.err != nil {
		return t.err
	}
	if len(act) == 0 {
		return t.tp.ev.Write(t.prefix, data)
	}
	return t.tp.ev.Write(t.prefix[:eventheader.HeaderSize], act, t.prefix[eventheader.HeaderSize:], data)
}

// Event0 is an event without fields, defined by Define0.
type Event0 struct{ typed }

// Define0 defines an event without fields on p's tracepoint for level and
// keyword, registering the tracepoint if it is the first use. Options set
// the header's id, version, opcode and tag (WithID, WithOpcode, WithTag)
// and group fields in structs (WithStruct); the same holds for Define1 ...
// Define6.
func Define0(p *Provider, name string, level eventheader.Level, keyword uint64, opts ...EventOption) *Event0 {
	return &Event0{define(p, name, level, keyword, opts)}
}

// Write writes the event if its tracepoint is enabled.
func (e *Event0) Write() error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write(nil, nil)
}

// WriteActivity is Write with the activity id extension, as
// Builder.SetActivityID adds it: id, and related — the activity that
// started this one, usually given on an OpcodeActivityStart event — unless
// nil. With id nil it is Write. Both are copied, not kept; the write
// allocates nothing more than Write. Every EventN has it, the ids before
// the values. A UUID type's value u is passed as (*[16]byte)(&u).
func (e *Event0) WriteActivity(id, related *[16]byte) error {
	if !e.tp.Enabled() {
		return nil
	}
	var buf [activityMax]byte
	return e.write(appendActivity(buf[:0], id, related), nil)
}
