package eventheader

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// This file shows values as JSON the way Microsoft's EventFormatter
// (libeventheader-decode-cpp) does, so that its output can be compared
// byte for byte: "0x…" strings for hex, errno names, IPv4/IPv6/UUID and
// time text, booleans that are neither 0 nor 1 as numbers, strings with
// invalid UTF-8 bytes shown as the Latin-1 characters of those bytes, and
// 32-bit characters beyond Unicode in the old 5- and 6-byte UTF-8 forms.

// AppendJSON appends the event as one JSON object:
//
//	{ "n": "Provider:Event", "field": value, …, "meta": { "level": 5, … } }
//
// with field tags in member names ("name;tag=0x12"). It returns the
// iteration error, if any, with what was appended so far.
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{ "n": "`...)
	dst = appendUTF8(dst, []byte(e.Tracepoint.Provider))
	dst = append(dst, ':')
	dst = appendUTF8(dst, e.EventName())
	dst = append(dst, '"')
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case ItemArrayEnd:
			dst = append(dst, " ]"...)
			continue
		case ItemStructEnd:
			dst = append(dst, " }"...)
			continue
		}
		// After '[' or '{' no comma.
		if c := dst[len(dst)-1]; c == '[' || c == '{' {
			dst = append(dst, ' ')
		} else {
			dst = append(dst, ", "...)
		}
		named := it.ArrayFlags == 0 || it.Kind == ItemArrayBegin
		if named {
			dst = append(dst, '"')
			dst = appendUTF8(dst, it.Name)
			if it.Tag != 0 {
				dst = append(dst, ";tag=0x"...)
				dst = AppendHex(dst, uint64(it.Tag))
			}
			dst = append(dst, `": `...)
		}
		switch it.Kind {
		case ItemArrayBegin:
			dst = append(dst, '[')
		case ItemStructBegin:
			dst = append(dst, '{')
		case ItemValue:
			dst = it.AppendJSON(dst)
		}
	}
	if err := f.Err(); err != nil {
		return dst, err
	}
	dst = append(dst, `, "meta": `...)
	dst = e.AppendMetaJSON(dst, false)
	return append(dst, " }"...), nil
}

// AppendMetaJSON appends the metadata EventFormatter shows — those of id,
// version, level, keyword, opcode, tag, activity and relatedActivity that
// are set — as a JSON object: spaced as Microsoft's decoder prints it
// (`{ "level": 4, "keyword": "0x1" }`), or compact (`{"level":4,...}`).
func (e *Event) AppendMetaJSON(dst []byte, compact bool) []byte {
	open, key, colon, end := "{", ` "`, `": `, " }"
	if compact {
		open, key, colon, end = "{", `"`, `":`, "}"
	}
	dst = append(dst, open...)
	n := len(dst)
	member := func(name string) {
		if len(dst) != n {
			dst = append(dst, ',')
		}
		dst = append(dst, key...)
		dst = append(dst, name...)
		dst = append(dst, colon...)
	}
	h := &e.Header
	if h.ID != 0 {
		member("id")
		dst = strconv.AppendUint(dst, uint64(h.ID), 10)
	}
	if h.Version != 0 {
		member("version")
		dst = strconv.AppendUint(dst, uint64(h.Version), 10)
	}
	if h.Level != 0 {
		member("level")
		dst = strconv.AppendUint(dst, uint64(h.Level), 10)
	}
	if e.Tracepoint.Keyword != 0 {
		member("keyword")
		dst = appendQuotedHex(dst, e.Tracepoint.Keyword)
	}
	if h.Opcode != 0 {
		member("opcode")
		dst = strconv.AppendUint(dst, uint64(h.Opcode), 10)
	}
	if h.Tag != 0 {
		member("tag")
		dst = appendQuotedHex(dst, uint64(h.Tag))
	}
	if e.ActivityID != nil {
		member("activity")
		dst = append(AppendUUID(append(dst, '"'), e.ActivityID), '"')
	}
	if e.RelatedActivityID != nil {
		member("relatedActivity")
		dst = append(AppendUUID(append(dst, '"'), e.RelatedActivityID), '"')
	}
	return append(dst, end...)
}

// AppendJSON appends the value of an ItemValue as JSON, by its encoding
// and format, as EventFormatter shows it.
func (it *Item) AppendJSON(dst []byte) []byte {
	v := it.Value
	bo := it.ByteOrder()
	switch it.Encoding {
	case EncodingValue8:
		switch it.Format {
		default:
			return strconv.AppendUint(dst, uint64(v[0]), 10)
		case FormatSignedInt:
			return strconv.AppendInt(dst, int64(int8(v[0])), 10)
		case FormatHexInt:
			return appendQuotedHex(dst, uint64(v[0]))
		case FormatBoolean:
			return appendBool(dst, uint32(v[0]))
		case FormatHexBytes:
			return AppendHexBytes(dst, v)
		case FormatString8:
			return appendUCS(append(dst, '"'), uint32(v[0]), true)
		}
	case EncodingValue16:
		u := bo.Uint16(v)
		switch it.Format {
		default:
			return strconv.AppendUint(dst, uint64(u), 10)
		case FormatSignedInt:
			return strconv.AppendInt(dst, int64(int16(u)), 10)
		case FormatHexInt:
			return appendQuotedHex(dst, uint64(u))
		case FormatBoolean:
			return appendBool(dst, uint32(u))
		case FormatHexBytes:
			return AppendHexBytes(dst, v)
		case FormatStringUTF:
			return appendUCS(append(dst, '"'), uint32(u), true)
		case FormatPort:
			return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint16(v)), 10)
		}
	case EncodingValue32:
		return appendValue32(dst, it.Format, v, bo, false)
	case EncodingValue64:
		return appendValue64(dst, it.Format, v, bo, false)
	case EncodingValue128:
		switch it.Format {
		default:
			return AppendHexBytes(dst, v)
		case FormatUUID:
			return append(AppendUUID(append(dst, '"'), v), '"')
		case FormatIPAddress, FormatIPAddressObsolete:
			return append(appendIPv6(append(dst, '"'), v), '"')
		}
	case EncodingZStringChar8:
		switch it.Format {
		case FormatHexBytes:
			return AppendHexBytes(dst, v)
		case FormatString8:
			return appendLatin1(dst, v)
		case FormatStringUTFBOM, FormatStringXML, FormatStringJSON:
			if d, ok := appendBOM(dst, v, bo); ok {
				return d
			}
		}
		return appendUTF8Quoted(dst, v)
	case EncodingStringLength16Char8, EncodingBinaryLength16Char8:
		return appendChar8(dst, it.Encoding, it.Format, v, bo)
	case EncodingZStringChar16, EncodingStringLength16Char16:
		switch it.Format {
		case FormatHexBytes:
			return AppendHexBytes(dst, v)
		case FormatStringUTFBOM, FormatStringXML, FormatStringJSON:
			if d, ok := appendBOM(dst, v, bo); ok {
				return d
			}
		}
		return appendUTF16(dst, v, bo)
	case EncodingZStringChar32, EncodingStringLength16Char32:
		switch it.Format {
		case FormatHexBytes:
			return AppendHexBytes(dst, v)
		case FormatStringUTFBOM, FormatStringXML, FormatStringJSON:
			if d, ok := appendBOM(dst, v, bo); ok {
				return d
			}
		}
		return appendUTF32(dst, v, bo)
	}
	return append(dst, "null"...)
}

// appendChar8 shows a counted 8-bit string or binary, whose size may make
// it one of the fixed-size formats.
func appendChar8(dst []byte, enc Encoding, f Format, v []byte, bo binary.ByteOrder) []byte {
	fixed := func(sizes ...int) bool {
		for _, s := range sizes {
			if len(v) == s {
				return true
			}
		}
		return false
	}
	ok := true
	switch f {
	case FormatUnsignedInt, FormatSignedInt, FormatHexInt:
		ok = fixed(0, 1, 2, 4, 8)
	case FormatErrno, FormatPid:
		ok = fixed(0, 4)
	case FormatTime, FormatFloat:
		ok = fixed(0, 4, 8)
	case FormatBoolean:
		ok = fixed(0, 1, 2, 4)
	case FormatUUID:
		ok = fixed(0, 16)
	case FormatPort:
		ok = fixed(0, 2)
	case FormatIPAddress, FormatIPAddressObsolete:
		ok = fixed(0, 4, 16)
	case FormatHexBytes:
		return AppendHexBytes(dst, v)
	case FormatString8:
		return appendLatin1(dst, v)
	case FormatStringUTF:
		return appendUTF8Quoted(dst, v)
	case FormatStringUTFBOM, FormatStringXML, FormatStringJSON:
		if d, ok := appendBOM(dst, v, bo); ok {
			return d
		}
		return appendUTF8Quoted(dst, v)
	default:
		ok = false
	}
	if !ok {
		if enc == EncodingBinaryLength16Char8 {
			return AppendHexBytes(dst, v)
		}
		return appendUTF8Quoted(dst, v)
	}
	if len(v) == 0 {
		return append(dst, "null"...)
	}
	switch f {
	case FormatUnsignedInt, FormatSignedInt, FormatHexInt:
		var u uint64
		var s int64
		switch len(v) {
		case 1:
			u, s = uint64(v[0]), int64(int8(v[0]))
		case 2:
			x := bo.Uint16(v)
			u, s = uint64(x), int64(int16(x))
		case 4:
			x := bo.Uint32(v)
			u, s = uint64(x), int64(int32(x))
		case 8:
			u = bo.Uint64(v)
			s = int64(u)
		}
		switch f {
		case FormatUnsignedInt:
			return strconv.AppendUint(dst, u, 10)
		case FormatSignedInt:
			return strconv.AppendInt(dst, s, 10)
		}
		return appendQuotedHex(dst, u)
	case FormatBoolean:
		switch len(v) {
		case 1:
			return appendBool(dst, uint32(v[0]))
		case 2:
			return appendBool(dst, uint32(bo.Uint16(v)))
		}
		return appendBool(dst, bo.Uint32(v))
	case FormatPort:
		return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint16(v)), 10)
	case FormatUUID:
		return append(AppendUUID(append(dst, '"'), v), '"')
	case FormatIPAddress, FormatIPAddressObsolete:
		if len(v) == 16 {
			return append(appendIPv6(append(dst, '"'), v), '"')
		}
	}
	if len(v) == 8 {
		return appendValue64(dst, f, v, bo, true)
	}
	return appendValue32(dst, f, v, bo, true)
}

func appendValue32(dst []byte, f Format, v []byte, bo binary.ByteOrder, _ bool) []byte {
	u := bo.Uint32(v)
	switch f {
	default:
		return strconv.AppendUint(dst, uint64(u), 10)
	case FormatSignedInt, FormatPid:
		return strconv.AppendInt(dst, int64(int32(u)), 10)
	case FormatHexInt:
		return appendQuotedHex(dst, uint64(u))
	case FormatErrno:
		return append(appendErrno(append(dst, '"'), u), '"')
	case FormatTime:
		return append(appendTime(append(dst, '"'), int64(int32(u))), '"')
	case FormatBoolean:
		return appendBool(dst, u)
	case FormatFloat:
		return appendFloat(dst, float64(math.Float32frombits(u)), 32)
	case FormatHexBytes:
		return AppendHexBytes(dst, v)
	case FormatStringUTF:
		return appendUCS(append(dst, '"'), u, true)
	case FormatIPAddress, FormatIPAddressObsolete:
		dst = append(dst, '"')
		for i, b := range v[:4] {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
		return append(dst, '"')
	}
}

func appendValue64(dst []byte, f Format, v []byte, bo binary.ByteOrder, _ bool) []byte {
	u := bo.Uint64(v)
	switch f {
	default:
		return strconv.AppendUint(dst, u, 10)
	case FormatSignedInt:
		return strconv.AppendInt(dst, int64(u), 10)
	case FormatHexInt:
		return appendQuotedHex(dst, u)
	case FormatTime:
		return append(appendTime(append(dst, '"'), int64(u)), '"')
	case FormatFloat:
		return appendFloat(dst, math.Float64frombits(u), 64)
	case FormatHexBytes:
		return AppendHexBytes(dst, v)
	}
}

// AppendHex appends u in upper-case hexadecimal without "0x", as
// EventFormatter writes keywords, tags and hex values.
func AppendHex(dst []byte, u uint64) []byte {
	const digits = "0123456789ABCDEF"
	var b [16]byte
	i := len(b)
	for {
		i--
		b[i] = digits[u&15]
		u >>= 4
		if u == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

func appendQuotedHex(dst []byte, u uint64) []byte {
	dst = append(dst, `"0x`...)
	return append(AppendHex(dst, u), '"')
}

func appendBool(dst []byte, u uint32) []byte {
	switch u {
	case 0:
		return append(dst, "false"...)
	case 1:
		return append(dst, "true"...)
	}
	return strconv.AppendInt(dst, int64(int32(u)), 10)
}

// AppendHexBytes appends v as a JSON string of its bytes in lower-case
// hex, separated by spaces ("01 02 03"), as EventFormatter writes binary
// values and perf-decode a tracepoint's struct fields.
func AppendHexBytes(dst []byte, v []byte) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, '"')
	for i, b := range v {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, digits[b>>4], digits[b&15])
	}
	return append(dst, '"')
}

// AppendUUID appends the 16 bytes of v as a UUID's text
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", in the bytes' order), as
// EventFormatter writes activity ids and UUID fields.
func AppendUUID(dst []byte, v []byte) []byte {
	const digits = "0123456789abcdef"
	for i, b := range v[:16] {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, digits[b>>4], digits[b&15])
	}
	return dst
}

// appendIPv6 writes the address as glibc's inet_ntop does: the first
// longest run of two or more zero groups as "::", and the last 32 bits
// dotted when the address is IPv4-compatible or IPv4-mapped.
func appendIPv6(dst []byte, v []byte) []byte {
	var w [8]uint16
	for i := range w {
		w[i] = binary.BigEndian.Uint16(v[2*i:])
	}
	best, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		best = -1
	}
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				dst = append(dst, ':')
			}
			continue
		}
		if i != 0 {
			dst = append(dst, ':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || bestLen == 5 && w[5] == 0xffff) {
			for k, b := range v[12:16] {
				if k > 0 {
					dst = append(dst, '.')
				}
				dst = strconv.AppendUint(dst, uint64(b), 10)
			}
			break
		}
		dst = strconv.AppendUint(dst, uint64(w[i]), 16)
	}
	if best >= 0 && best+bestLen == 8 {
		dst = append(dst, ':')
	}
	return dst
}

func appendErrno(dst []byte, u uint32) []byte {
	if t := ErrnoText(u); t != "" {
		return append(dst, t...)
	}
	dst = append(dst, "ERRNO("...)
	dst = strconv.AppendInt(dst, int64(int32(u)), 10)
	return append(dst, ')')
}

// ErrnoText is how a FormatErrno value u is shown when it is an errno
// Linux names — its JSON without the quotes, "ENOENT(2)" — and "" for any
// other (shown as "ERRNO(n)"). The texts are made once: an errno field is
// written by most events of the programs that have one.
func ErrnoText(u uint32) string {
	if t := errnoTexts(); u < uint32(len(t)) {
		return t[u]
	}
	return ""
}

// errnoTexts are the texts of the errnos below 134 that Linux names, as
// Microsoft's decoder shows them: "" for 0, 41 and 58, which Linux does
// not use (shown as "ERRNO(n)").
var errnoTexts = sync.OnceValue(func() *[134]string {
	var t [134]string
	for u := range uint32(len(t)) {
		if u != 0 && u != 41 && u != 58 {
			if name := unix.ErrnoName(unix.Errno(u)); name != "" {
				t[u] = name + "(" + strconv.FormatUint(uint64(u), 10) + ")"
			}
		}
	}
	return &t
})

// appendTime writes seconds since 1970 as UTC "YYYY-MM-DDThh:mm:ss", or
// "TIME(n)" when the year does not fit a C int (as gmtime_r refuses).
func appendTime(dst []byte, s int64) []byte {
	days := s / 86400
	rem := s % 86400
	if rem < 0 {
		rem += 86400
		days--
	}
	// Civil from days (proleptic Gregorian), days since 1970-01-01.
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
		y++
	}
	if y-1900 > math.MaxInt32 || y-1900 < math.MinInt32 {
		dst = append(dst, "TIME("...)
		dst = strconv.AppendInt(dst, s, 10)
		return append(dst, ')')
	}
	if y < 0 {
		dst = append(dst, '-')
		dst = pad(dst, -y, 3)
	} else {
		dst = pad(dst, y, 4)
	}
	dst = append(dst, '-')
	dst = pad(dst, m, 2)
	dst = append(dst, '-')
	dst = pad(dst, d, 2)
	dst = append(dst, 'T')
	dst = pad(dst, rem/3600, 2)
	dst = append(dst, ':')
	dst = pad(dst, rem/60%60, 2)
	dst = append(dst, ':')
	return pad(dst, rem%60, 2)
}

func pad(dst []byte, v int64, width int) []byte {
	var b [24]byte
	s := strconv.AppendInt(b[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// appendFloat writes the shortest text that reads back as the same value,
// fixed or exponent form whichever is shorter (fixed on a tie), as C++'s
// std::to_chars; NaN and infinities as quoted "nan", "-nan", "inf", "-inf".
func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		dst = append(dst, '"')
		if math.Signbit(f) {
			dst = append(dst, '-')
		}
		if math.IsNaN(f) {
			dst = append(dst, "nan"...)
		} else {
			dst = append(dst, "inf"...)
		}
		return append(dst, '"')
	}
	var eb, fb [64]byte
	e := strconv.AppendFloat(eb[:0], f, 'e', -1, bits)
	// The fixed form is longer than the exponent form when the exponent
	// is far from 0; only near 0 is it worth (and short enough) to write.
	exp := 0
	if i := bytes.IndexByte(e, 'e'); i >= 0 {
		exp, _ = strconv.Atoi(string(e[i+1:]))
	}
	if exp < -8 || exp > 24 {
		return append(dst, e...)
	}
	x := strconv.AppendFloat(fb[:0], f, 'f', -1, bits)
	if len(e) < len(x) {
		return append(dst, e...)
	}
	return append(dst, x...)
}

func needsEscape(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '\\', '"':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	const digits = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', digits[c>>4], digits[c&15])
}

// appendUCS writes one code point as UTF-8, extended to 5-, 6- and 7-byte
// forms for values beyond Unicode; quote closes a JSON string.
func appendUCS(dst []byte, u uint32, quote bool) []byte {
	switch {
	case u < 0x80:
		if needsEscape(byte(u)) {
			dst = appendEscape(dst, byte(u))
		} else {
			dst = append(dst, byte(u))
		}
	case u < 0x800:
		dst = append(dst, byte(u>>6)|0xc0, byte(u)&0x3f|0x80)
	case u < 0x10000:
		dst = append(dst, byte(u>>12)|0xe0, byte(u>>6)&0x3f|0x80, byte(u)&0x3f|0x80)
	case u < 0x200000:
		dst = append(dst, byte(u>>18)|0xf0, byte(u>>12)&0x3f|0x80, byte(u>>6)&0x3f|0x80, byte(u)&0x3f|0x80)
	case u < 0x4000000:
		dst = append(dst, byte(u>>24)|0xf8, byte(u>>18)&0x3f|0x80, byte(u>>12)&0x3f|0x80, byte(u>>6)&0x3f|0x80, byte(u)&0x3f|0x80)
	case u < 0x80000000:
		dst = append(dst, byte(u>>30)|0xfc, byte(u>>24)&0x3f|0x80, byte(u>>18)&0x3f|0x80, byte(u>>12)&0x3f|0x80, byte(u>>6)&0x3f|0x80, byte(u)&0x3f|0x80)
	default:
		dst = append(dst, 0xfe, byte(u>>30)&0x3f|0x80, byte(u>>24)&0x3f|0x80, byte(u>>18)&0x3f|0x80, byte(u>>12)&0x3f|0x80, byte(u>>6)&0x3f|0x80, byte(u)&0x3f|0x80)
	}
	if quote {
		dst = append(dst, '"')
	}
	return dst
}

func appendLatin1(dst []byte, v []byte) []byte {
	dst = append(dst, '"')
	for _, b := range v {
		dst = appendUCS(dst, uint32(b), false)
	}
	return append(dst, '"')
}

func appendUTF32(dst []byte, v []byte, bo binary.ByteOrder) []byte {
	dst = append(dst, '"')
	for i := 0; i+4 <= len(v); i += 4 {
		dst = appendUCS(dst, bo.Uint32(v[i:]), false)
	}
	return append(dst, '"')
}

func appendUTF16(dst []byte, v []byte, bo binary.ByteOrder) []byte {
	dst = append(dst, '"')
	n := len(v) / 2
	for i := 0; i < n; i++ {
		w0 := uint32(bo.Uint16(v[2*i:]))
		u := w0
		if w0 >= 0xd800 && w0 <= 0xdbff && i+1 < n {
			if w1 := uint32(bo.Uint16(v[2*i+2:])); w1 >= 0xdc00 && w1 <= 0xdfff {
				u = (w0-0xd800)<<10 | (w1 - 0xdc00) | 0x10000
				i++
			}
		}
		dst = appendUCS(dst, u, false)
	}
	return append(dst, '"')
}

// appendBOM shows a string that starts with a byte order mark in the
// encoding the mark names; ok is false without a mark.
func appendBOM(dst []byte, v []byte, _ binary.ByteOrder) ([]byte, bool) {
	switch {
	case len(v) >= 4 && v[0] == 0xff && v[1] == 0xfe && v[2] == 0 && v[3] == 0:
		return appendUTF32(dst, v[4:len(v)&^3], binary.LittleEndian), true
	case len(v) >= 4 && v[0] == 0 && v[1] == 0 && v[2] == 0xfe && v[3] == 0xff:
		return appendUTF32(dst, v[4:len(v)&^3], binary.BigEndian), true
	case len(v) >= 2 && v[0] == 0xff && v[1] == 0xfe:
		return appendUTF16(dst, v[2:len(v)&^1], binary.LittleEndian), true
	case len(v) >= 2 && v[0] == 0xfe && v[1] == 0xff:
		return appendUTF16(dst, v[2:len(v)&^1], binary.BigEndian), true
	case len(v) >= 3 && v[0] == 0xef && v[1] == 0xbb && v[2] == 0xbf:
		return appendUTF8Quoted(dst, v[3:]), true
	}
	return dst, false
}

func appendUTF8Quoted(dst []byte, v []byte) []byte {
	return append(appendUTF8(append(dst, '"'), v), '"')
}

// appendUTF8 writes JSON-escaped UTF-8; a byte that does not start a valid
// sequence is written as the Latin-1 character of that byte. Surrogates
// encoded in 3 bytes pass through, as EventFormatter lets them.
func appendUTF8(dst []byte, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		b0 := v[i]
		if b0 < 0x80 {
			if needsEscape(b0) {
				dst = appendEscape(dst, b0)
			} else {
				dst = append(dst, b0)
			}
			continue
		}
		cont := func(k int) bool { return i+k < len(v) && v[i+k]&0xc0 == 0x80 }
		switch {
		case b0 >= 0xc0 && b0 <= 0xdf:
			if cont(1) && (uint32(b0&0x1f)<<6|uint32(v[i+1]&0x3f)) >= 0x80 {
				dst = append(dst, v[i:i+2]...)
				i++
				continue
			}
		case b0 >= 0xe0 && b0 <= 0xef:
			if cont(1) && cont(2) && (uint32(b0&0x0f)<<12|uint32(v[i+1]&0x3f)<<6|uint32(v[i+2]&0x3f)) >= 0x800 {
				dst = append(dst, v[i:i+3]...)
				i += 2
				continue
			}
		case b0 >= 0xf0 && b0 <= 0xf4:
			if cont(1) && cont(2) && cont(3) {
				c := uint32(b0&7)<<18 | uint32(v[i+1]&0x3f)<<12 | uint32(v[i+2]&0x3f)<<6 | uint32(v[i+3]&0x3f)
				if c >= 0x10000 && c <= 0x10ffff {
					dst = append(dst, v[i:i+4]...)
					i += 3
					continue
				}
			}
		}
		dst = append(dst, 0xc0|b0>>6, 0x80|b0&0x3f)
	}
	return dst
}
