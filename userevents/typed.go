package userevents

//go:generate go run ../internal/gentyped/gentyped.go -pkg userevents -o typedn.go

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// Value is what a typed event's field can be set from: an integer, a bool,
// a string or a byte slice, named types included.
//
//   - Integers and bools set integer fields (u8…u64, s8…s64, char, short,
//     int and their unsigned forms) at least as wide as the Go type, so no
//     value is cut: uint32 fits u32 and u64, int (8 bytes) only u64 and s64.
//     Signed Go types are sign-extended, unsigned ones zero-extended; the
//     field's own sign is not checked, as the kernel's printer shows 4-byte
//     fields both ways and calls char signed. A bool is 1 or 0.
//   - Strings and byte slices set char[N] and unsigned char[N] fields (at
//     most N bytes; shorter ones are NUL-padded), __data_loc and __rel_loc
//     fields (appended after the fixed fields; a NUL follows when the type
//     holds "char", as the kernel requires), and struct fields (exactly the
//     struct's size).
type Value interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~bool | ~string | ~[]byte
}

// goKind is how a typed field's Go value is read, decided from the type
// argument's reflect.Kind once, when the event is defined.
type goKind uint8

const (
	kInt8 goKind = iota + 1
	kInt16
	kInt32
	kInt64
	kUint8
	kUint16
	kUint32
	kUint64
	kBool
	kString
	kBytes
)

// plan is one field of a typed event: the Go value's kind and where and how
// it goes in the payload.
type plan struct {
	kind goKind
	fk   eventdef.Kind
	off  int // offset in the payload (the record's minus the header)
	size int
	nul  bool // a loc field of char: its data ends with a NUL
	f    *eventdef.Field

	n     int    // the field's number, from 1, and
	event string // the event's name, for errors
}

// typed is what every EventN holds: the registered event and its plans.
type typed struct {
	ev     *Event
	fields []plan
}

// stackPayload is the payload a typed Write builds on its stack: records up
// to this size are written without allocating; longer ones take a buffer
// from the heap.
const stackPayload = 512

func kindOf(t reflect.Type) goKind {
	switch t.Kind() {
	case reflect.Int8:
		return kInt8
	case reflect.Int16:
		return kInt16
	case reflect.Int32:
		return kInt32
	case reflect.Int64, reflect.Int:
		return kInt64
	case reflect.Uint8:
		return kUint8
	case reflect.Uint16:
		return kUint16
	case reflect.Uint32:
		return kUint32
	case reflect.Uint64, reflect.Uint, reflect.Uintptr:
		return kUint64
	case reflect.Bool:
		return kBool
	case reflect.String:
		return kString
	case reflect.Slice:
		return kBytes
	}
	return 0
}

// goSize is the size of the integers the kind reads; 0 for text.
func (k goKind) goSize() int {
	switch k {
	case kInt8, kUint8, kBool:
		return 1
	case kInt16, kUint16:
		return 2
	case kInt32, kUint32:
		return 4
	case kInt64, kUint64:
		return 8
	}
	return 0
}

// define registers cmd on f after checking that the Go types, in order,
// fit the command's fields; arity names the function in errors.
func define(f *File, cmd, arity string, types ...reflect.Type) (typed, error) {
	def, perr := eventdef.Parse(cmd)
	if perr == nil {
		if len(def.Fields) != len(types) {
			return typed{}, &Error{Op: "define", Input: cmd, Errno: unix.EINVAL,
				Reason: fmt.Sprintf("%s takes %d fields but the command has %d: give one type argument per field", arity, len(types), len(def.Fields))}
		}
		for i, t := range types {
			if reason := fits(&def.Fields[i], t); reason != "" {
				fd := &def.Fields[i]
				return typed{}, &Error{Op: "define", Input: cmd, Errno: unix.EINVAL,
					Reason: fmt.Sprintf("field %d %q: %s", i+1, fd.Type+" "+fd.Name, reason)}
			}
		}
	}
	// A command eventdef refuses is registered anyway: the backend refuses
	// it with the kernel's errno and words.
	ev, err := f.Register(cmd, 0)
	if err != nil {
		return typed{}, err
	}
	if ev.def == nil {
		ev.Close()
		return typed{}, &Error{Op: "define", Input: cmd, Errno: unix.EINVAL, Reason: "the event's command does not parse here"}
	}
	t := typed{ev: ev, fields: make([]plan, len(types))}
	for i, typ := range types {
		fd := &ev.def.Fields[i]
		t.fields[i] = plan{kind: kindOf(typ), fk: fd.Kind, off: fd.Offset - eventdef.HeaderSize, size: fd.Size, nul: fd.CString, f: fd, n: i + 1, event: ev.Name()}
	}
	return t, nil
}

// fits says why a value of Go type t cannot set field fd, or "".
func fits(fd *eventdef.Field, t reflect.Type) string {
	k := kindOf(t)
	switch k {
	case 0:
		return fmt.Sprintf("Go type %s is not a Value", t)
	case kBytes:
		if t.Elem().Kind() != reflect.Uint8 {
			return fmt.Sprintf("Go type %s is not a byte slice", t)
		}
	}
	switch fd.Kind {
	case eventdef.Integer:
		if k == kString || k == kBytes {
			return fmt.Sprintf("a Go %s does not set an integer field: use an integer type of at most %d bytes", t, fd.Size)
		}
		if k.goSize() > fd.Size {
			return fmt.Sprintf("a Go %s (%d bytes) does not fit a %d-byte field: use an integer type of at most %d bytes, or a wider field", t, k.goSize(), fd.Size, fd.Size)
		}
	case eventdef.Array, eventdef.Struct, eventdef.DataLoc, eventdef.RelLoc:
		if k != kString && k != kBytes {
			return fmt.Sprintf("a Go %s does not set a %s field: use a string or a []byte", t, fd.Type)
		}
	default:
		return fmt.Sprintf("a %s field cannot be set from Go", fd.Type)
	}
	return ""
}

// setInt stores v in the field's size.
func setInt(buf []byte, p *plan, v uint64) {
	b := buf[p.off : p.off+p.size]
	switch p.size {
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

// setText sets a char[N], struct or loc field from s or b (one is empty).
// It returns the payload, grown by any loc data: assigning to a *[]byte
// instead would send a payload on the caller's stack to the heap, and so
// would an error naming anything of it.
func setText(buf []byte, p *plan, s string, b []byte) ([]byte, error) {
	n := len(s) + len(b)
	switch p.fk {
	case eventdef.Array:
		if n > p.size {
			return buf, p.fail(unix.EINVAL, fmt.Sprintf("%d bytes do not fit %s", n, p.f.Type))
		}
		dst := buf[p.off : p.off+p.size] // zeroed by start: NUL-padded
		copy(dst[copy(dst, s):], b)
	case eventdef.Struct:
		if n != p.size {
			return buf, p.fail(unix.EINVAL, fmt.Sprintf("%s takes exactly %d bytes, not %d", p.f.Type, p.size, n))
		}
		dst := buf[p.off : p.off+p.size]
		copy(dst[copy(dst, s):], b)
	default: // DataLoc, RelLoc
		size := n
		if p.nul {
			size++
		}
		start := len(buf)
		off := start + eventdef.HeaderSize
		if p.fk == eventdef.RelLoc {
			off = start - (p.off + 4)
		}
		if off > 0xffff || size > 0xffff {
			return buf, p.fail(unix.E2BIG, fmt.Sprintf("%d bytes of data at offset %d do not fit the 16-bit loc word", size, off))
		}
		buf = append(buf, s...)
		buf = append(buf, b...)
		if p.nul {
			buf = append(buf, 0)
		}
		binary.NativeEndian.PutUint32(buf[p.off:], uint32(size)<<16|uint32(off))
	}
	return buf, nil
}

func (p *plan) fail(errno unix.Errno, reason string) error {
	return &Error{Op: "write", Input: p.event, Errno: errno,
		Reason: fmt.Sprintf("field %d %q: %s", p.n, p.f.Name, reason)}
}

// put sets the field of p from v in the payload buf and returns the
// payload. The value is read through its address with the kind found when
// the event was defined: a type switch on any(v) would miss named types,
// and converting v to an interface could allocate.
func put[T Value](buf []byte, p *plan, v T) ([]byte, error) {
	ptr := unsafe.Pointer(&v)
	switch p.kind {
	case kInt8:
		setInt(buf, p, uint64(int64(*(*int8)(ptr))))
	case kInt16:
		setInt(buf, p, uint64(int64(*(*int16)(ptr))))
	case kInt32:
		setInt(buf, p, uint64(int64(*(*int32)(ptr))))
	case kInt64:
		setInt(buf, p, uint64(*(*int64)(ptr)))
	case kUint8:
		setInt(buf, p, uint64(*(*uint8)(ptr)))
	case kUint16:
		setInt(buf, p, uint64(*(*uint16)(ptr)))
	case kUint32:
		setInt(buf, p, uint64(*(*uint32)(ptr)))
	case kUint64:
		setInt(buf, p, *(*uint64)(ptr))
	case kBool:
		if *(*bool)(ptr) {
			setInt(buf, p, 1)
		} else {
			setInt(buf, p, 0)
		}
	case kString:
		return setText(buf, p, *(*string)(ptr), nil)
	case kBytes:
		return setText(buf, p, "", *(*[]byte)(ptr))
	}
	return buf, nil
}

// start returns the payload's fixed part in stack (or, too small, in a new
// buffer), zeroed.
func (t *typed) start(stack []byte) []byte {
	n := t.ev.def.MinSize
	if cap(stack) < n {
		stack = make([]byte, n)
	}
	stack = stack[:n]
	clear(stack)
	return stack
}

// write writes the payload. A disable that raced with the Enabled check
// is no error: the record is dropped, as it would have been a moment later.
func (t *typed) write(payload []byte) error {
	err := t.ev.Write(payload)
	if err != nil && err == error(t.ev.disabled) {
		return nil
	}
	return err
}
