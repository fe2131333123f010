package ehslog

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"time"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventheader"
)

const (
	// maxFields is the most fields a struct holds: its count is the low 7
	// bits of its format byte.
	maxFields = 127
	// maxTop stands for no limit at the top level, which the metadata's
	// 65535 bytes bound instead.
	maxTop = math.MaxInt
	// maxNesting is how deep structs nest: Microsoft's decoder refuses
	// events with more than 8 nested structs.
	maxNesting = 8
)

// encoder writes attributes as field definitions (meta) and values (data),
// the two parts of an EventHeader event, so that a group found empty once
// resolved can be taken back out.
type encoder struct {
	meta, data []byte
	text       []byte // scratch for fmt's text of Any values
	dropped    int
	// replace is Options.ReplaceAttr, called with groups, the names of
	// the groups holding the attribute.
	replace func(groups []string, a slog.Attr) slog.Attr
	groups  []string
}

func (e *encoder) reset() {
	e.meta, e.data = e.meta[:0], e.data[:0]
	e.dropped = 0
	e.groups = e.groups[:0]
}

// attr writes a as the next field of a struct nested depth deep (0: the
// top level) that holds *n fields already, at most max: it adds to *n
// what it wrote (several fields for an inlined group, none for an empty
// attribute or group), and counts in e.dropped what did not fit.
func (e *encoder) attr(a slog.Attr, n *int, max, depth int) {
	v := a.Value.Resolve()
	if e.replace != nil && v.Kind() != slog.KindGroup {
		a.Value = v
		a = e.replace(e.groups, a)
		v = a.Value.Resolve()
	}
	if v.Kind() != slog.KindGroup {
		if a.Key == "" && v.Kind() == slog.KindAny && v.Any() == nil {
			return // the zero Attr: ignored
		}
		if *n >= max || depth > maxNesting {
			e.dropped++
			return
		}
		e.value(a.Key, v)
		*n++
		return
	}
	attrs := v.Group()
	if a.Key == "" { // inlined
		for _, ga := range attrs {
			e.attr(ga, n, max, depth)
		}
		return
	}
	if len(attrs) == 0 {
		return
	}
	if *n >= max || depth >= maxNesting {
		// The group's attributes, not the group, are what is lost.
		e.dropped += leaves(attrs)
		return
	}
	mark := len(e.meta)
	e.meta = appendName(e.meta, a.Key)
	e.meta = append(e.meta, byte(eventheader.EncodingStruct|eventheader.EncodingChain), 0)
	countAt := len(e.meta) - 1
	m := 0
	if e.replace != nil {
		e.groups = append(e.groups, a.Key)
	}
	for _, ga := range attrs {
		e.attr(ga, &m, maxFields, depth+1)
	}
	if e.replace != nil {
		e.groups = e.groups[:len(e.groups)-1]
	}
	if m == 0 {
		e.meta = e.meta[:mark] // empty once resolved: omitted
		return
	}
	e.meta[countAt] = byte(m)
	*n++
}

// leaves counts the attributes of a group and of the groups in it, once
// resolved, that would be fields.
func leaves(attrs []slog.Attr) int {
	n := 0
	for _, a := range attrs {
		v := a.Value.Resolve()
		switch {
		case v.Kind() == slog.KindGroup:
			n += leaves(v.Group())
		case a.Key != "" || v.Kind() != slog.KindAny || v.Any() != nil:
			n++
		}
	}
	return n
}

// def writes a field definition: the name, the encoding, and the format
// if not the default.
func (e *encoder) def(name string, enc eventheader.Encoding, f eventheader.Format) {
	e.meta = appendName(e.meta, name)
	if f == eventheader.FormatDefault {
		e.meta = append(e.meta, byte(enc))
	} else {
		e.meta = append(e.meta, byte(enc|eventheader.EncodingChain), byte(f))
	}
}

// value writes one scalar field.
func (e *encoder) value(name string, v slog.Value) {
	switch v.Kind() {
	case slog.KindString:
		e.def(name, eventheader.EncodingStringLength16Char8, 0)
		e.data = appendCounted(e.data, v.String())
	case slog.KindInt64:
		e.def(name, eventheader.EncodingValue64, eventheader.FormatSignedInt)
		e.data = binary.LittleEndian.AppendUint64(e.data, uint64(v.Int64()))
	case slog.KindUint64:
		e.def(name, eventheader.EncodingValue64, 0)
		e.data = binary.LittleEndian.AppendUint64(e.data, v.Uint64())
	case slog.KindFloat64:
		e.def(name, eventheader.EncodingValue64, eventheader.FormatFloat)
		e.data = binary.LittleEndian.AppendUint64(e.data, math.Float64bits(v.Float64()))
	case slog.KindBool:
		e.def(name, eventheader.EncodingValue8, eventheader.FormatBoolean)
		b := byte(0)
		if v.Bool() {
			b = 1
		}
		e.data = append(e.data, b)
	case slog.KindDuration:
		e.def(name, eventheader.EncodingValue64, eventheader.FormatSignedInt)
		e.data = binary.LittleEndian.AppendUint64(e.data, uint64(v.Duration()))
	case slog.KindTime:
		e.text = v.Time().AppendFormat(e.text[:0], time.RFC3339Nano)
		e.def(name, eventheader.EncodingStringLength16Char8, 0)
		e.data = appendCounted(e.data, e.text)
	default: // KindAny; a LogValuer resolved to one
		switch x := v.Any().(type) {
		case []byte:
			e.attrBytes(name, x)
			return
		case *slog.Source: // the built-in source, through ReplaceAttr
			if x != nil {
				e.source(name, x.Function, x.File, x.Line)
				return
			}
		}
		e.text = fmt.Appendf(e.text[:0], "%+v", v.Any())
		e.def(name, eventheader.EncodingStringLength16Char8, 0)
		e.data = appendCounted(e.data, e.text)
	}
}

// source writes a source struct as slog's JSON handler nests it.
func (e *encoder) source(name, function, file string, line int) {
	e.meta = appendName(e.meta, name)
	e.meta = append(e.meta, byte(eventheader.EncodingStruct|eventheader.EncodingChain), 3)
	e.def("function", eventheader.EncodingStringLength16Char8, 0)
	e.data = appendCounted(e.data, function)
	e.def("file", eventheader.EncodingStringLength16Char8, 0)
	e.data = appendCounted(e.data, file)
	e.def("line", eventheader.EncodingValue64, eventheader.FormatSignedInt)
	e.data = binary.LittleEndian.AppendUint64(e.data, uint64(int64(line)))
}

// attrBytes writes binary, cut to the 65535 bytes its count holds.
func (e *encoder) attrBytes(name string, p []byte) {
	e.def(name, eventheader.EncodingBinaryLength16Char8, 0)
	if len(p) > math.MaxUint16 {
		p = p[:math.MaxUint16]
	}
	e.data = binary.LittleEndian.AppendUint16(e.data, uint16(len(p)))
	e.data = append(e.data, p...)
}

// appendName appends a field name and its NUL; a NUL in name, which would
// end it early, becomes '_'.
func appendName(dst []byte, name string) []byte {
	at := len(dst)
	dst = append(dst, name...)
	for i := at; i < len(dst); i++ {
		if dst[i] == 0 {
			dst[i] = '_'
		}
	}
	return append(dst, 0)
}

// appendCounted appends a string_length16_char8 value: its length and
// bytes, cut to 65535 bytes at a UTF-8 character's start.
func appendCounted[S string | []byte](dst []byte, s S) []byte {
	s = cut(s)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// cut shortens s to at most 65535 bytes, the most a counted string holds,
// without splitting a UTF-8 character.
func cut[S string | []byte](s S) S {
	if len(s) <= math.MaxUint16 {
		return s
	}
	i := math.MaxUint16
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
