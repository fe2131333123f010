// Package tracefmt reads the format files of tracefs
// (events/<system>/<name>/format) of any trace event — user_events,
// kernel tracepoints, kprobes — and decodes raw records by them, as perf
// and libtraceevent do for the tracing data of a perf.data file.
//
// It is not the user_events model (package eventdef parses the commands
// that create user events and prints their format files); it is the reader
// on the other side, which knows events only by the text the kernel shows.
// It does not evaluate "print fmt": fields are decoded by their declared
// type, offset, size and sign.
package tracefmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Format is a parsed format file.
type Format struct {
	// System is the event's system (the directory above it); the format
	// text does not carry it, so Parse leaves it to the caller.
	System string
	Name   string
	ID     int
	// Common are the fields every event has (common_type, common_flags,
	// common_preempt_count, common_pid): those before the blank line.
	Common []Field
	// Fields are the event's own fields, in the order the file lists them.
	Fields   []Field
	PrintFmt string
}

// Kind says how a field is decoded.
type Kind uint8

const (
	// Int is an integer of 1, 2, 4 or 8 bytes, signed when Field.Signed.
	Int Kind = iota + 1
	// String is text: a char array ("char comm[16]") or a __data_loc /
	// __rel_loc char array, ending at its first NUL.
	String
	// Bytes is anything else: arrays of other types, structs, integers of
	// odd sizes, loc fields that are not text.
	Bytes
)

// Loc says where a field's data lives.
type Loc uint8

const (
	// Inline data is at Offset, Size bytes long.
	Inline Loc = iota
	// DataLoc: a u32 at Offset whose low 16 bits are the data's offset from
	// the record's start and whose high 16 bits are its length.
	DataLoc
	// RelLoc: like DataLoc, but the offset counts from the end of the u32.
	RelLoc
)

// Field is one "field:" line.
type Field struct {
	// Type is the declaration's type, with the array brackets moved from
	// the name: "char[16]", "__data_loc char[]", "unsigned long", "const char *".
	Type   string
	Name   string
	Offset int
	Size   int
	Signed bool
	Kind   Kind
	Loc    Loc
}

// Parse parses the text of a format file. Errors wrap unix.EINVAL and say
// which line is wrong.
func Parse(text []byte) (*Format, error) {
	f := &Format{ID: -1}
	s := string(text)
	lineNo := 0
	inFields, common := false, true
	for len(s) > 0 {
		var line string
		line, s, _ = strings.Cut(s, "\n")
		lineNo++
		switch {
		case strings.HasPrefix(line, "name: "):
			f.Name = line[len("name: "):]
		case strings.HasPrefix(line, "ID: "):
			id, err := strconv.Atoi(line[len("ID: "):])
			if err != nil || id < 0 {
				return nil, lineError(lineNo, line, "bad ID")
			}
			f.ID = id
		case line == "format:":
			inFields = true
		case strings.HasPrefix(line, "print fmt: "):
			f.PrintFmt = line[len("print fmt: "):]
			// The print format is the rest of the file: it is one line,
			// but nothing in it is ours to split.
			if rest := strings.TrimSuffix(s, "\n"); rest != "" {
				f.PrintFmt += "\n" + rest
			}
			s = ""
		case strings.TrimSpace(line) == "":
			if inFields && len(f.Common) > 0 {
				common = false
			}
		case inFields && strings.HasPrefix(strings.TrimLeft(line, " \t"), "field:"):
			fl, err := parseField(strings.TrimLeft(line, " \t"))
			if err != nil {
				return nil, lineError(lineNo, line, err.Error())
			}
			if common {
				f.Common = append(f.Common, fl)
			} else {
				f.Fields = append(f.Fields, fl)
			}
		default:
			return nil, lineError(lineNo, line, "unexpected line")
		}
	}
	if f.Name == "" {
		return nil, fmt.Errorf("format: no name line: %w", unix.EINVAL)
	}
	if f.ID < 0 {
		return nil, fmt.Errorf("format of %s: no ID line: %w", f.Name, unix.EINVAL)
	}
	return f, nil
}

func lineError(n int, line, why string) error {
	if len(line) > 80 {
		line = line[:80] + "…"
	}
	return fmt.Errorf("format line %d %q: %s: %w", n, line, why, unix.EINVAL)
}

// parseField parses "field:<decl>;\toffset:N;\tsize:N;\tsigned:N;".
func parseField(line string) (Field, error) {
	var fl Field
	parts := strings.Split(strings.TrimSuffix(line, ";"), ";")
	if len(parts) < 3 {
		return fl, fmt.Errorf("want field, offset and size")
	}
	decl := strings.TrimSpace(strings.TrimPrefix(parts[0], "field:"))
	haveOffset, haveSize := false, false
	for _, p := range parts[1:] {
		key, val, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return fl, fmt.Errorf("want key:value, got %q", p)
		}
		n, err := strconv.ParseUint(val, 10, 31)
		if err != nil {
			return fl, fmt.Errorf("bad %s %q", key, val)
		}
		switch key {
		case "offset":
			fl.Offset, haveOffset = int(n), true
		case "size":
			fl.Size, haveSize = int(n), true
		case "signed":
			fl.Signed = n != 0
		}
		// Other keys (none in 6.12) are for newer kernels to add.
	}
	if !haveOffset || !haveSize {
		return fl, fmt.Errorf("want offset and size")
	}
	// The name is the declaration's last word; brackets after it belong
	// to the type ("char comm[16]" is a char[16] named comm).
	sp := strings.LastIndexAny(decl, " \t*")
	if sp < 0 {
		return fl, fmt.Errorf("declaration %q has no type", decl)
	}
	fl.Type, fl.Name = strings.TrimRight(decl[:sp+1], " \t"), decl[sp+1:]
	if i := strings.IndexByte(fl.Name, '['); i >= 0 {
		fl.Type += fl.Name[i:]
		fl.Name = fl.Name[:i]
	}
	if fl.Name == "" || fl.Type == "" {
		return fl, fmt.Errorf("declaration %q needs a type and a name", decl)
	}
	switch {
	case strings.HasPrefix(fl.Type, "__data_loc"):
		fl.Loc = DataLoc
	case strings.HasPrefix(fl.Type, "__rel_loc"):
		fl.Loc = RelLoc
	}
	switch {
	case strings.Contains(fl.Type, "char") && (fl.Loc != Inline || strings.Contains(fl.Type, "[")):
		fl.Kind = String
	case fl.Loc != Inline || strings.Contains(fl.Type, "[") || strings.HasPrefix(fl.Type, "struct "):
		fl.Kind = Bytes
	case fl.Size == 1 || fl.Size == 2 || fl.Size == 4 || fl.Size == 8:
		fl.Kind = Int
	default:
		fl.Kind = Bytes
	}
	if fl.Loc != Inline && fl.Size != 4 {
		return fl, fmt.Errorf("loc field %s has size %d, not 4", fl.Name, fl.Size)
	}
	return fl, nil
}

// Field returns the field (own or common) called name, or nil.
func (f *Format) Field(name string) *Field {
	for i := range f.Fields {
		if f.Fields[i].Name == name {
			return &f.Fields[i]
		}
	}
	for i := range f.Common {
		if f.Common[i].Name == name {
			return &f.Common[i]
		}
	}
	return nil
}

// Value is a field of one record. Data aliases the record.
type Value struct {
	Field *Field
	// Data is the field's bytes: for loc fields the data the loc word
	// points at. Nil when Overflow.
	Data []byte
	// Overflow is set when the field or its data lies outside the record.
	Overflow bool
}

// Value returns field f of record raw.
func (f *Field) Value(raw []byte) Value {
	var v Value
	f.value(&v, raw)
	return v
}

// value sets *v to field f of record raw.
func (f *Field) value(v *Value, raw []byte) {
	data, ok := f.Data(raw)
	*v = Value{Field: f, Data: data, Overflow: !ok}
}

// Data returns the field's bytes in record raw — for loc fields the data
// the loc word points at — and false when they lie outside the record.
// It is Value without the Value, for decoders that go field by field.
func (f *Field) Data(raw []byte) ([]byte, bool) {
	end := f.Offset + f.Size
	if end > len(raw) {
		return nil, false
	}
	data := raw[f.Offset:end]
	if f.Loc == Inline {
		return data, true
	}
	loc := binary.NativeEndian.Uint32(data)
	start, n := int(loc&0xffff), int(loc>>16)
	if f.Loc == RelLoc {
		start += end
	}
	if start+n > len(raw) {
		return nil, false
	}
	return raw[start : start+n], true
}

// Decode appends the values of the format's own fields in raw to dst.
func (f *Format) Decode(dst []Value, raw []byte) []Value {
	n := len(dst)
	dst = slices.Grow(dst, len(f.Fields))[:n+len(f.Fields)]
	for i := range f.Fields {
		f.Fields[i].value(&dst[n+i], raw)
	}
	return dst
}

// Int returns an Int value sign- or zero-extended to 64 bits as the field
// says (as a uint64 holding the bits when the field is unsigned).
func (v Value) Int() int64 {
	d := v.Data
	switch len(d) {
	case 1:
		if v.Field.Signed {
			return int64(int8(d[0]))
		}
		return int64(d[0])
	case 2:
		x := binary.NativeEndian.Uint16(d)
		if v.Field.Signed {
			return int64(int16(x))
		}
		return int64(x)
	case 4:
		x := binary.NativeEndian.Uint32(d)
		if v.Field.Signed {
			return int64(int32(x))
		}
		return int64(x)
	case 8:
		return int64(binary.NativeEndian.Uint64(d))
	}
	return 0
}

// Uint returns the value's bits zero-extended.
func (v Value) Uint() uint64 {
	d := v.Data
	switch len(d) {
	case 1:
		return uint64(d[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(d))
	case 4:
		return uint64(binary.NativeEndian.Uint32(d))
	case 8:
		return binary.NativeEndian.Uint64(d)
	}
	return 0
}

// Text returns a String value's bytes up to the first NUL.
func (v Value) Text() []byte {
	if i := bytes.IndexByte(v.Data, 0); i >= 0 {
		return v.Data[:i]
	}
	return v.Data
}
