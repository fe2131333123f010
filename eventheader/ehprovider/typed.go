package ehprovider

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

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
// A write whose values take more than 256 bytes allocates once.
// Other named types are not matched by their underlying type: convert them.
type Value interface {
	bool | int8 | int16 | int32 | int64 | int |
		uint8 | uint16 | uint32 | uint64 | uint | uintptr |
		float32 | float64 | string | []byte |
		Hex32 | Hex64 | Errno | PID | UUID | time.Time
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

func encodingOf[T Value]() (eventheader.Encoding, eventheader.Format) {
	var zero T
	switch any(zero).(type) {
	case bool:
		return eventheader.EncodingValue8, eventheader.FormatBoolean
	case int8:
		return eventheader.EncodingValue8, eventheader.FormatSignedInt
	case int16:
		return eventheader.EncodingValue16, eventheader.FormatSignedInt
	case int32:
		return eventheader.EncodingValue32, eventheader.FormatSignedInt
	case int64, int:
		return eventheader.EncodingValue64, eventheader.FormatSignedInt
	case uint8:
		return eventheader.EncodingValue8, eventheader.FormatDefault
	case uint16:
		return eventheader.EncodingValue16, eventheader.FormatDefault
	case uint32:
		return eventheader.EncodingValue32, eventheader.FormatDefault
	case uint64, uint, uintptr:
		return eventheader.EncodingValue64, eventheader.FormatDefault
	case float32:
		return eventheader.EncodingValue32, eventheader.FormatFloat
	case float64:
		return eventheader.EncodingValue64, eventheader.FormatFloat
	case string:
		return eventheader.EncodingStringLength16Char8, eventheader.FormatDefault
	case Hex32:
		return eventheader.EncodingValue32, eventheader.FormatHexInt
	case Hex64:
		return eventheader.EncodingValue64, eventheader.FormatHexInt
	case Errno:
		return eventheader.EncodingValue32, eventheader.FormatErrno
	case PID:
		return eventheader.EncodingValue32, eventheader.FormatPid
	case UUID:
		return eventheader.EncodingValue128, eventheader.FormatUUID
	case time.Time:
		return eventheader.EncodingValue64, eventheader.FormatTime
	default: // []byte
		return eventheader.EncodingBinaryLength16Char8, eventheader.FormatDefault
	}
}

// appendValue appends v's bytes as encodingOf[T] says.
func appendValue[T Value](dst []byte, v T) []byte {
	le := binary.LittleEndian
	switch v := any(v).(type) {
	case bool:
		if v {
			return append(dst, 1)
		}
		return append(dst, 0)
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
	case []byte:
		if len(v) > math.MaxUint16 {
			v = v[:math.MaxUint16]
		}
		dst = le.AppendUint16(dst, uint16(len(v)))
		return append(dst, v...)
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
// a write whose values take more (long strings or []byte) allocates their
// buffer.
const stackData = 256

type fieldDef struct {
	name string
	enc  eventheader.Encoding
	f    eventheader.Format
}

// EventOption sets a typed event's header: its id and version, opcode or
// tag. The level is the tracepoint's.
type EventOption func(*eventheader.Header)

// WithID gives the event a stable id and the version of its layout.
func WithID(id uint16, version uint8) EventOption {
	return func(h *eventheader.Header) { h.ID, h.Version = id, version }
}

// WithOpcode gives the event an opcode, e.g. eventheader.OpcodeActivityStart.
func WithOpcode(op eventheader.Opcode) EventOption {
	return func(h *eventheader.Header) { h.Opcode = op }
}

// WithTag gives the event a provider-defined 16-bit tag.
func WithTag(tag uint16) EventOption {
	return func(h *eventheader.Header) { h.Tag = tag }
}

func define(p *Provider, name string, level eventheader.Level, keyword uint64, opts []EventOption, fields ...fieldDef) typed {
	t := typed{tp: p.Tracepoint(level, keyword)}
	h := eventheader.Header{}
	for _, o := range opts {
		o(&h)
	}
	h.Level = level
	var b eventheader.Builder
	b.Reset(name, h)
	for _, fd := range fields {
		b.Field(fd.name, fd.enc, fd.f, 0)
	}
	var err error
	t.prefix, err = b.AppendEvent(nil)
	if err != nil {
		t.err = fmt.Errorf("ehprovider: define %s: %w", name, err)
		t.prefix = nil
	}
	return t
}

func def[T Value](name string) fieldDef {
	enc, f := encodingOf[T]()
	return fieldDef{name, enc, f}
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

func (t *typed) write(data []byte) error {
	if t.err != nil {
		return t.err
	}
	return t.tp.ev.Write(t.prefix, data)
}

// Event0 is an event without fields, defined by Define0.
type Event0 struct{ typed }

// Define0 defines an event without fields on p's tracepoint for level and
// keyword, registering the tracepoint if it is the first use. Options set
// the header's id, version, opcode and tag (WithID, WithOpcode, WithTag);
// the same holds for Define1 ... Define4.
func Define0(p *Provider, name string, level eventheader.Level, keyword uint64, opts ...EventOption) *Event0 {
	return &Event0{define(p, name, level, keyword, opts)}
}

// Write writes the event if its tracepoint is enabled.
func (e *Event0) Write() error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write(nil)
}

// Event1 is an event of one field, defined by Define1.
type Event1[A Value] struct{ typed }

// Define1 defines an event of one field named fa.
func Define1[A Value](p *Provider, name string, level eventheader.Level, keyword uint64, fa string, opts ...EventOption) *Event1[A] {
	return &Event1[A]{define(p, name, level, keyword, opts, def[A](fa))}
}

// Write writes the event if its tracepoint is enabled; while it is not,
// it only loads the enable word.
func (e *Event1[A]) Write(a A) error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write1(a)
}

func (e *Event1[A]) write1(a A) error {
	var buf [stackData]byte
	d := appendValue(buf[:0], a)
	return e.write(d)
}

// Event2 is an event of two fields, defined by Define2.
type Event2[A, B Value] struct{ typed }

// Define2 defines an event of two fields named fa and fb.
func Define2[A, B Value](p *Provider, name string, level eventheader.Level, keyword uint64, fa, fb string, opts ...EventOption) *Event2[A, B] {
	return &Event2[A, B]{define(p, name, level, keyword, opts, def[A](fa), def[B](fb))}
}

// Write writes the event if its tracepoint is enabled.
func (e *Event2[A, B]) Write(a A, b B) error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write2(a, b)
}

func (e *Event2[A, B]) write2(a A, b B) error {
	var buf [stackData]byte
	d := appendValue(buf[:0], a)
	d = appendValue(d, b)
	return e.write(d)
}

// Event3 is an event of three fields, defined by Define3.
type Event3[A, B, C Value] struct{ typed }

// Define3 defines an event of three fields named fa, fb and fc.
func Define3[A, B, C Value](p *Provider, name string, level eventheader.Level, keyword uint64, fa, fb, fc string, opts ...EventOption) *Event3[A, B, C] {
	return &Event3[A, B, C]{define(p, name, level, keyword, opts, def[A](fa), def[B](fb), def[C](fc))}
}

// Write writes the event if its tracepoint is enabled.
func (e *Event3[A, B, C]) Write(a A, b B, c C) error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write3(a, b, c)
}

func (e *Event3[A, B, C]) write3(a A, b B, c C) error {
	var buf [stackData]byte
	d := appendValue(buf[:0], a)
	d = appendValue(d, b)
	d = appendValue(d, c)
	return e.write(d)
}

// Event4 is an event of four fields, defined by Define4.
type Event4[A, B, C, D Value] struct{ typed }

// Define4 defines an event of four fields named fa, fb, fc and fd.
func Define4[A, B, C, D Value](p *Provider, name string, level eventheader.Level, keyword uint64, fa, fb, fc, fd string, opts ...EventOption) *Event4[A, B, C, D] {
	return &Event4[A, B, C, D]{define(p, name, level, keyword, opts, def[A](fa), def[B](fb), def[C](fc), def[D](fd))}
}

// Write writes the event if its tracepoint is enabled.
func (e *Event4[A, B, C, D]) Write(a A, b B, c C, d D) error {
	if !e.tp.Enabled() {
		return nil
	}
	return e.write4(a, b, c, d)
}

func (e *Event4[A, B, C, D]) write4(a A, b B, c C, d D) error {
	var buf [stackData]byte
	p := appendValue(buf[:0], a)
	p = appendValue(p, b)
	p = appendValue(p, c)
	p = appendValue(p, d)
	return e.write(p)
}
