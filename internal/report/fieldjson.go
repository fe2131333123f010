package report

import (
	"strconv"
	"strings"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/tracefmt"
)

// jsonKind is how a plain (format file) field is shown in JSON: what
// Microsoft's perf-decode (libtracepoint-decode-cpp's PerfFieldMetadata,
// libeventheader-decode-cpp's AppendSampleFieldAsJsonImpl) makes of its
// declaration, chosen once per event.
type jsonKind uint8

const (
	jsonSigned   jsonKind = iota // integers, by the format's signed: flag
	jsonUnsigned                 // unsigned integers
	jsonHex                      // integers as "0x…" strings: pointers, types perf-decode does not know
	jsonString                   // char (not signed or unsigned char): text to its first NUL
	jsonBlob                     // structs: the bytes as "01 02 …"
)

// jsonField is a field's JSON decoding.
type jsonField struct {
	kind  jsonKind
	elem  int  // element size: 1, 2, 4 or 8 bytes
	array bool // a JSON array of elements: fixed arrays, __data_loc, __rel_loc
}

// planJSON is PerfFieldMetadata's reading of a field: its kind and element
// size from the type's words ("unsigned", "short", "long", "struct",
// "char", u8…s64 and their __u8 and int8_t spellings, a pointer's '*'),
// the format's signed: flag overriding the type's sign for integers — so
// a __rel_loc u32[], which Linux marks signed:1 (it signs every type not
// starting with 'u'), is an array of signed numbers — the element size
// from the field's size for a scalar, a JSON array for any array or loc
// field, and bytes for what is left.
func planJSON(f *tracefmt.Field) jsonField {
	var long, longLong, short, unsigned, signed, structure, pointer bool
	base, count := "", 0
	for w := range strings.FieldsFuncSeq(f.Type, func(r rune) bool { return r == ' ' || r == '\t' || r == '[' }) {
		if w[0] == ']' || '0' <= w[0] && w[0] <= '9' {
			// An array's length, "16]" of "char[16]".
			count, _ = strconv.Atoi(strings.TrimSuffix(w, "]"))
			continue
		}
		if strings.Contains(w, "*") {
			pointer = true
			w = strings.ReplaceAll(w, "*", "")
		}
		switch w {
		case "":
		case "long":
			longLong = long
			long = true
		case "short":
			short = true
		case "unsigned":
			unsigned = true
		case "signed":
			signed = true
		case "struct":
			structure = true
		case "__data_loc", "__rel_loc", "const", "volatile", "__attribute__":
		default:
			base = w
		}
	}
	j := jsonField{kind: jsonHex, array: f.Loc != tracefmt.Inline || strings.Contains(f.Type, "[")}
	sized := true // the element size is known from the type
	switch {
	case pointer:
		j.kind, j.elem = jsonHex, 8 // a 64-bit file's long
	case structure:
		j.kind, j.elem = jsonBlob, 1
	case base == "" || base == "int":
		j.kind, j.elem = jsonSigned, 4
		if unsigned {
			j.kind = jsonUnsigned
		}
		switch {
		case longLong:
			j.elem = 8
		case long:
			j.elem = 8
			if unsigned {
				j.kind = jsonHex // perf-decode shows unsigned long in hex
			}
		case short:
			j.elem = 2
		}
	case base == "char":
		j.kind, j.elem = jsonString, 1
		if unsigned {
			j.kind = jsonUnsigned
		} else if signed {
			j.kind = jsonSigned
		}
	default:
		j.kind, sized = jsonHex, false
		for _, t := range intTypes {
			if base == t.name || base == "__"+t.name || base == t.c {
				j.kind, j.elem, sized = t.kind, t.size, true
				break
			}
		}
	}
	if j.kind == jsonSigned || j.kind == jsonUnsigned {
		j.kind = jsonUnsigned
		if f.Signed {
			j.kind = jsonSigned
		}
	}
	if !j.array {
		// A scalar's size says its element size.
		switch f.Size {
		case 1, 2, 4, 8:
			j.elem, sized = f.Size, true
		}
	} else if !sized && f.Loc == tracefmt.Inline && count > 0 && f.Size%count == 0 {
		// A fixed array of a type perf-decode does not know: its
		// elements are the size over the length, if that is an
		// integer's.
		switch e := f.Size / count; e {
		case 1, 2, 4, 8:
			j.elem, sized = e, true
		}
	}
	if !sized {
		j.elem = 1
	}
	return j
}

// intTypes are the integer type names perf-decode knows, with their
// <stdint.h> spelling.
var intTypes = [...]struct {
	name, c string
	kind    jsonKind
	size    int
}{
	{"u8", "uint8_t", jsonUnsigned, 1}, {"s8", "int8_t", jsonSigned, 1},
	{"u16", "uint16_t", jsonUnsigned, 2}, {"s16", "int16_t", jsonSigned, 2},
	{"u32", "uint32_t", jsonUnsigned, 4}, {"s32", "int32_t", jsonSigned, 4},
	{"u64", "uint64_t", jsonUnsigned, 8}, {"s64", "int64_t", jsonSigned, 8},
}

// appendJSONField appends data, a field's bytes in a record, as j says.
// Integers of 1 and 2 bytes are zero-extended whatever their sign, as
// perf-decode reads them (and as perf script and the kernel's own trace
// text print them: s16 0xfffe is 65534); those of 4 and 8 bytes are signed
// or not by the kind.
func appendJSONField(b []byte, j jsonField, data []byte) []byte {
	switch {
	case j.kind == jsonString:
		return appendJSONBytes(b, data, true)
	case j.kind == jsonBlob:
		return eventheader.AppendHexBytes(b, data)
	case !j.array:
		if len(data) < j.elem {
			return append(b, "null"...)
		}
		return appendJSONInt(b, j, data)
	}
	b = append(b, '[')
	for i := 0; i+j.elem <= len(data); i += j.elem {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONInt(b, j, data[i:i+j.elem])
	}
	return append(b, ']')
}

// appendJSONInt appends the integer of j.elem bytes at the start of d.
func appendJSONInt(b []byte, j jsonField, d []byte) []byte {
	var v uint64
	switch j.elem {
	case 1:
		v = uint64(d[0])
	case 2:
		v = uint64(ne.Uint16(d))
	case 4:
		v = uint64(ne.Uint32(d))
		if j.kind == jsonSigned {
			return appendInt(b, int64(int32(v)))
		}
	default:
		v = ne.Uint64(d)
		if j.kind == jsonSigned {
			return appendInt(b, int64(v))
		}
	}
	if j.kind == jsonHex {
		b = append(b, `"0x`...)
		b = eventheader.AppendHex(b, v)
		return append(b, '"')
	}
	return appendUint(b, v)
}
