package eventheader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Errors of the decoder. Every error wraps one of them.
var (
	// ErrNotEventHeader: the tracepoint name or the header says this is
	// not an EventHeader event this package can decode (unknown flags, no
	// metadata, level mismatch).
	ErrNotEventHeader = errors.New("eventheader: not a decodable EventHeader event")
	// ErrInvalidData: the event claims to be EventHeader but its bytes are
	// inconsistent (truncated, bad sizes, bad field definitions).
	ErrInvalidData = errors.New("eventheader: invalid event data")
)

// Event is one decoded event: its tracepoint's attributes, header and
// extensions. Its slices point into the bytes given to Decode.
type Event struct {
	Tracepoint TracepointName
	Header     Header // ID and Tag in host order
	// Name is the event name with its attributes ("name;attr=value"), as
	// the metadata holds it; use EventName for the name alone.
	Name []byte
	// ActivityID and RelatedActivityID are nil when absent.
	ActivityID, RelatedActivityID []byte

	bigEndian bool
	meta      []byte // the metadata extension: the name, a NUL, the fields
	fields    []byte // field definitions after the name
	data      []byte // the payload after the header and extensions
}

// Metadata returns the event's metadata as written: its name with
// attributes, a NUL, and its field definitions. Events of one layout —
// the same name and fields, whatever their values — have the same
// metadata: a reader that derives something from a layout once (its
// field names made keys, say) can find it again by these bytes, and what
// it derived for an item by the item's DefOffset in them.
func (e *Event) Metadata() []byte { return e.meta }

// EventName returns the event name without attributes.
func (e *Event) EventName() []byte {
	if i := bytes.IndexByte(e.Name, ';'); i >= 0 {
		return e.Name[:i]
	}
	return e.Name
}

// ByteOrder returns the event's byte order.
func (e *Event) ByteOrder() binary.ByteOrder {
	if e.bigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Payload returns the event's data after the header and extensions.
func (e *Event) Payload() []byte { return e.data }

// Decode decodes an event as written to user_events_data (without the
// 4-byte write index) for the tracepoint named tracepointName. It does not
// allocate. The fields are read with Fields.
func Decode(tracepointName string, b []byte) (Event, error) {
	tp, err := ParseTracepointName(tracepointName)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrNotEventHeader, err)
	}
	return DecodeFor(tp, b)
}

// DecodeFor is Decode for a tracepoint whose name is parsed already: what
// a reader of many events of one tracepoint calls, without parsing the
// name each time.
func DecodeFor(tp TracepointName, b []byte) (Event, error) {
	var e Event
	e.Tracepoint = tp
	if len(b) < HeaderSize {
		return e, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrInvalidData, len(b), HeaderSize)
	}
	h := Header{Flags: Flags(b[0]), Version: b[1], Opcode: Opcode(b[6]), Level: Level(b[7])}
	if h.Flags&^FlagsKnown != 0 {
		return e, fmt.Errorf("%w: header flags %#x have unknown bits", ErrNotEventHeader, h.Flags)
	}
	e.bigEndian = h.Flags&FlagLittleEndian == 0
	bo := e.ByteOrder()
	h.ID = bo.Uint16(b[2:])
	h.Tag = bo.Uint16(b[4:])
	e.Header = h
	if h.Level != tp.Level {
		return e, fmt.Errorf("%w: header level %d differs from the tracepoint's L%x", ErrNotEventHeader, h.Level, tp.Level)
	}
	pos := HeaderSize
	var meta []byte
	if h.Flags&FlagExtension != 0 {
		for {
			if len(b)-pos < 4 {
				return e, fmt.Errorf("%w: extension header at %d truncated", ErrInvalidData, pos)
			}
			size := int(bo.Uint16(b[pos:]))
			kind := ExtensionKind(bo.Uint16(b[pos+2:]))
			pos += 4
			if len(b)-pos < size {
				return e, fmt.Errorf("%w: extension at %d claims %d bytes, %d remain", ErrInvalidData, pos-4, size, len(b)-pos)
			}
			ext := b[pos : pos+size : pos+size]
			switch kind & ExtensionKindMask {
			case ExtensionInvalid:
				return e, fmt.Errorf("%w: extension kind 0 at %d", ErrInvalidData, pos-4)
			case ExtensionMetadata:
				if meta != nil {
					return e, fmt.Errorf("%w: two metadata extensions", ErrInvalidData)
				}
				meta = ext
			case ExtensionActivityID:
				if e.ActivityID != nil || size != 16 && size != 32 {
					return e, fmt.Errorf("%w: activity id extension of %d bytes (must be 16 or 32, once)", ErrInvalidData, size)
				}
				e.ActivityID = ext[:16]
				if size == 32 {
					e.RelatedActivityID = ext[16:]
				}
			}
			pos += size
			if kind&ExtensionChain == 0 {
				break
			}
		}
	}
	if meta == nil {
		return e, fmt.Errorf("%w: no metadata extension (the event's fields are described elsewhere)", ErrNotEventHeader)
	}
	n := bytes.IndexByte(meta, 0)
	if n < 0 {
		return e, fmt.Errorf("%w: event name in the metadata is not NUL-terminated", ErrInvalidData)
	}
	e.Name = meta[:n:n]
	e.meta = meta
	e.fields = meta[n+1:]
	e.data = b[pos:]
	return e, nil
}

// ItemKind says what an Item is.
type ItemKind uint8

const (
	ItemValue       ItemKind = iota + 1 // a scalar field or one array element
	ItemArrayBegin                      // an array field: its elements follow, then ItemArrayEnd
	ItemArrayEnd                        //
	ItemStructBegin                     // a struct (or struct array element): its fields follow, then ItemStructEnd
	ItemStructEnd                       //
)

func (k ItemKind) String() string {
	return [...]string{"?", "value", "array-begin", "array-end", "struct-begin", "struct-end"}[k%6]
}

// Item is one step of the iteration over an event's fields.
type Item struct {
	Kind ItemKind
	// Name is the field name with attributes ("name;attr=value"); for an
	// array's elements and ends, the array's name.
	Name     []byte
	Encoding Encoding // value part only; ArrayFlags holds the array flag
	Format   Format   // value part only (for a struct: its field count)
	Tag      uint16
	// ArrayFlags is EncodingCArray, EncodingVArray or 0. Inside an array,
	// ArrayIndex counts the elements and ArrayCount is their number.
	ArrayFlags Encoding
	ArrayIndex uint16
	ArrayCount uint16
	// Value is the value's bytes in the event's byte order: a fixed-size
	// value, or a string's or binary's content without its length prefix or
	// NUL terminator.
	Value []byte
	// Depth is the nesting: 0 for top-level fields; each open struct and
	// array adds one.
	Depth int
	// ElementMetadata is set on ItemArrayBegin of a struct array: the raw
	// definitions of the struct's fields (present even if the array is empty).
	ElementMetadata []byte
	// RawEncoding and RawFormat are the definition bytes as written,
	// flags included (RawFormat is 0 when absent).
	RawEncoding, RawFormat byte

	bigEndian bool
	defOff    int32
}

// DefOffset is where the item's field definition starts in its event's
// Metadata: the same for the same field of every event of that
// metadata, whatever its values, and different for two fields of one
// event. An array's elements and end have the array's, a struct's end the
// struct's.
func (it *Item) DefOffset() int { return int(it.defOff) }

// ByteOrder returns the byte order of Value.
func (it *Item) ByteOrder() binary.ByteOrder {
	if it.bigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// FieldName returns the name without attributes.
func (it *Item) FieldName() []byte {
	if i := bytes.IndexByte(it.Name, ';'); i >= 0 {
		return it.Name[:i]
	}
	return it.Name
}

// MaxDepth bounds nesting, each struct and each array counting one;
// deeper events are refused. Microsoft's decoder allows 8 nested structs
// (its arrays do not count): 8 nested arrays of structs, each struct
// holding an array, are 24 here.
const MaxDepth = 32

// fieldDef is a field definition; offsets are into the metadata, which
// a 16-bit extension size keeps under 64 KiB. Kept small: the iterator
// holds a stack of them and is copied by value.
type fieldDef struct {
	nameOff, nameLen uint16
	enc, format      byte // as written, flags included
	tag              uint16
	count            uint16 // constant-length array count
	metaEnd          uint16 // metadata offset after the definition
}

type frame struct {
	def       fieldDef // the array's (or struct's) definition
	remaining int16    // struct: fields left (-1: the top level, unbounded)
	count     uint16   // array
	index     uint16
	elemMeta  uint16 // struct array: where the element's field definitions start
	isArray   bool
}

type step uint8

const (
	stepField step = iota
	stepElement
	stepDone
)

// Fields iterates over an event's fields without allocating:
//
//	it := ev.Fields()
//	for it.Next() { item := it.Item(); ... }
//	if err := it.Err(); err != nil { ... }
type Fields struct {
	meta  []byte
	base  int32 // meta's offset in the event's Metadata
	mpos  int
	data  []byte
	dpos  int
	big   bool
	next  step
	stack [MaxDepth + 1]frame
	depth int // number of open frames; stack[0] is the top level
	item  Item
	err   error
	// budget is the number of items left before the iteration is refused.
	budget int
	defs   *Defs // where the definitions read are kept; nil: nowhere
}

// Defs keeps the field definitions an iteration read from one layout's
// metadata (FieldsDefs), for the iterations over the next events of that
// layout: a program writes a few layouts millions of times, and each
// definition would otherwise be read again for each event. A definition is
// read from the metadata's bytes at its offset and the event's byte order
// (a tag's and an array count's) alone, so it is the same for every event
// of that metadata and byte order. The zero value is ready; it holds the
// definitions of one layout at a time.
type Defs struct {
	meta string // the metadata's field definitions, copied
	big  bool
	// idx says which of defs is the definition at each offset of meta:
	// 1 + its index, 0 while not read.
	idx  []uint16
	defs []fieldDef
}

// FieldsDefs is Fields, reading each field definition from defs when an
// iteration over an event of the same layout read it before, and keeping
// those it reads in defs; defs is emptied first when it holds another
// layout's.
func (e *Event) FieldsDefs(defs *Defs) Fields {
	f := e.Fields()
	if defs.meta != string(e.fields) || defs.big != e.bigEndian {
		defs.meta, defs.big = string(e.fields), e.bigEndian
		defs.idx = make([]uint16, len(e.fields))
		defs.defs = defs.defs[:0]
	}
	f.defs = defs
	return f
}

// MaxItems bounds the work of one iteration: the items it yields plus the
// struct definitions it skips. A struct whose fields the metadata lacks
// ends early and holds nothing (the reference's own encoders write such
// structs), so nested constant arrays of them could make billions of
// items out of a few bytes. Microsoft's decoder stops at 4096 by default;
// this limit is far above any event a 64 KiB write can hold otherwise,
// and, unlike a limit by size, the same for an event and its re-encoding.
const MaxItems = 1 << 20

// Fields returns an iterator over the event's fields.
func (e *Event) Fields() Fields {
	f := Fields{meta: e.fields, base: int32(len(e.meta) - len(e.fields)), data: e.data, big: e.bigEndian}
	f.stack[0] = frame{remaining: -1}
	f.budget = MaxItems
	return f
}

// Item returns the current item; valid until the next call to Next.
func (f *Fields) Item() *Item { return &f.item }

// Err returns the error that stopped the iteration, or nil at its end.
func (f *Fields) Err() error { return f.err }

func (f *Fields) fail(format string, args ...any) bool {
	f.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidData}, args...)...)
	f.next = stepDone
	return false
}

func (f *Fields) u16(b []byte) uint16 {
	if f.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

// name returns a definition's name with attributes.
func (f *Fields) name(d *fieldDef) []byte {
	e := int(d.nameOff) + int(d.nameLen)
	return f.meta[d.nameOff:e:e]
}

// readDef reads a field definition at mpos: from f.defs when an
// iteration read it before.
func (f *Fields) readDef() (fieldDef, bool) {
	if f.defs == nil {
		return f.parseDef()
	}
	if i := f.defs.idx[f.mpos]; i > 0 {
		return f.defs.defs[i-1], true
	}
	d, ok := f.parseDef()
	if ok && len(f.defs.defs) < math.MaxUint16 {
		f.defs.defs = append(f.defs.defs, d)
		f.defs.idx[f.mpos] = uint16(len(f.defs.defs))
	}
	return d, ok
}

// parseDef reads a field definition at mpos from the metadata.
func (f *Fields) parseDef() (fieldDef, bool) {
	var d fieldDef
	m := f.meta
	p := f.mpos
	n := bytes.IndexByte(m[p:], 0)
	if n < 0 {
		return d, f.fail("field name at metadata offset %d not NUL-terminated", p)
	}
	d.nameOff, d.nameLen = uint16(p), uint16(n)
	p += n + 1
	if p >= len(m) {
		return d, f.fail("field %q has no encoding byte", f.name(&d))
	}
	d.enc = m[p]
	p++
	if Encoding(d.enc)&EncodingChain != 0 {
		if p >= len(m) {
			return d, f.fail("field %q has no format byte", f.name(&d))
		}
		d.format = m[p]
		p++
		if Format(d.format)&FormatChain != 0 {
			if len(m)-p < 2 {
				return d, f.fail("field %q has no tag", f.name(&d))
			}
			d.tag = f.u16(m[p:])
			p += 2
		}
	}
	switch Encoding(d.enc) & EncodingArrayMask {
	case EncodingCArray:
		if len(m)-p < 2 {
			return d, f.fail("field %q has no array count", f.name(&d))
		}
		d.count = f.u16(m[p:])
		p += 2
		if d.count == 0 {
			return d, f.fail("constant-length array %q has count 0", f.name(&d))
		}
	case EncodingArrayMask:
		return d, f.fail("field %q has both array flags", f.name(&d))
	}
	v := Encoding(d.enc) & EncodingValueMask
	if v == EncodingInvalid || v >= EncodingMax {
		return d, f.fail("field %q has encoding %d", f.name(&d), v)
	}
	if v == EncodingStruct && Format(d.format)&FormatValueMask == 0 {
		return d, f.fail("struct %q has no fields", f.name(&d))
	}
	d.metaEnd = uint16(p)
	return d, true
}

// skipStruct moves mpos past the definitions of a struct's n fields.
func (f *Fields) skipStruct(n int) bool {
	for ; n > 0 && f.mpos < len(f.meta); n-- {
		// Skipping is work too: an array of arrays of structs skips the
		// inner struct's definitions once per outer element.
		if f.budget--; f.budget < 0 {
			return f.fail("more than %d items from %d bytes of data: nested arrays of structs", MaxItems, len(f.data))
		}
		d, ok := f.readDef()
		if !ok {
			return false
		}
		f.mpos = int(d.metaEnd)
		if Encoding(d.enc)&EncodingValueMask == EncodingStruct {
			n += int(Format(d.format) & FormatValueMask)
		}
	}
	return true
}

// readValue reads one value of the definition's encoding at dpos.
func (f *Fields) readValue(d *fieldDef) bool {
	enc := Encoding(d.enc) & EncodingValueMask
	rest := f.data[f.dpos:]
	var v []byte
	adv := 0
	if sz := enc.FixedSize(); sz != 0 {
		if len(rest) < sz {
			return f.fail("field %q: %d-byte value, %d bytes remain", f.name(d), sz, len(rest))
		}
		v, adv = rest[:sz:sz], sz
	} else {
		cs := enc.CharSize()
		switch enc {
		case EncodingZStringChar8, EncodingZStringChar16, EncodingZStringChar32:
			i := 0
			for ; i+cs <= len(rest); i += cs {
				z := true
				for _, c := range rest[i : i+cs] {
					if c != 0 {
						z = false
						break
					}
				}
				if z {
					break
				}
			}
			if i+cs > len(rest) {
				return f.fail("field %q: string not terminated", f.name(d))
			}
			v, adv = rest[:i:i], i+cs
		default:
			if len(rest) < 2 {
				return f.fail("field %q: no length", f.name(d))
			}
			n := int(f.u16(rest)) * cs
			if len(rest)-2 < n {
				return f.fail("field %q: %d-byte string, %d bytes remain", f.name(d), n, len(rest)-2)
			}
			v, adv = rest[2:2+n:2+n], 2+n
		}
	}
	f.dpos += adv
	f.item.Value = v
	return true
}

func (f *Fields) setItem(kind ItemKind, d *fieldDef) {
	f.item = Item{Kind: kind, Name: f.name(d), Encoding: Encoding(d.enc) & EncodingValueMask,
		Format: Format(d.format) & FormatValueMask, Tag: d.tag, Depth: f.depth,
		RawEncoding: d.enc, RawFormat: d.format, bigEndian: f.big, defOff: f.base + int32(d.nameOff)}
}

// Next moves to the next item; false at the end or on an error (see Err).
func (f *Fields) Next() bool {
	if f.budget--; f.budget < 0 && f.next != stepDone {
		return f.fail("more than %d items from %d bytes of data: nested arrays of empty structs", MaxItems, len(f.data))
	}
	switch f.next {
	case stepField:
		return f.nextField()
	case stepElement:
		return f.nextElement()
	}
	return false
}

func (f *Fields) nextField() bool {
	top := &f.stack[f.depth]
	if top.remaining == 0 || f.mpos == len(f.meta) {
		if f.depth == 0 {
			f.next = stepDone
			return false
		}

		// The struct ends.
		s := *top
		f.depth--
		f.setItem(ItemStructEnd, &s.def)
		f.afterStruct(&s)
		return true
	}
	if top.remaining > 0 {
		top.remaining--
	}
	d, ok := f.readDef()
	if !ok {
		return false
	}
	f.mpos = int(d.metaEnd)
	enc := Encoding(d.enc)
	if af := enc & EncodingArrayMask; af != 0 {
		count := d.count
		if af == EncodingVArray {
			if len(f.data)-f.dpos < 2 {
				return f.fail("array %q: no count", f.name(&d))
			}
			count = f.u16(f.data[f.dpos:])
			f.dpos += 2
		}
		if f.depth == MaxDepth {
			return f.fail("nesting deeper than %d", MaxDepth)
		}
		f.setItem(ItemArrayBegin, &d)
		f.item.ArrayFlags = af
		f.item.ArrayCount = count
		if enc&EncodingValueMask == EncodingStruct {
			start := f.mpos
			if !f.skipStruct(int(Format(d.format) & FormatValueMask)) {
				return false
			}
			f.item.ElementMetadata = f.meta[start:f.mpos:f.mpos]
			// Elements re-read the definitions from start.
			f.mpos = start
			if count == 0 {
				f.mpos = start + len(f.item.ElementMetadata)
			}
			f.depth++
			f.stack[f.depth] = frame{isArray: true, def: d, count: count, elemMeta: uint16(start)}
		} else {
			f.depth++
			f.stack[f.depth] = frame{isArray: true, def: d, count: count}
		}
		f.next = stepElement
		return true
	}
	if enc&EncodingValueMask == EncodingStruct {
		if f.depth == MaxDepth {
			return f.fail("nesting deeper than %d", MaxDepth)
		}
		f.setItem(ItemStructBegin, &d)
		f.depth++
		f.stack[f.depth] = frame{def: d, remaining: int16(Format(d.format) & FormatValueMask)}
		f.next = stepField
		return true
	}
	f.setItem(ItemValue, &d)
	return f.readValue(&d)
}

// afterStruct continues after a struct s (already popped) ended.
func (f *Fields) afterStruct(s *frame) {
	f.item.Depth = f.depth
	if f.depth > 0 && f.stack[f.depth].isArray {
		a := &f.stack[f.depth]
		f.item.ArrayFlags = Encoding(a.def.enc) & EncodingArrayMask
		f.item.ArrayIndex = a.index
		f.item.ArrayCount = a.count
		a.index++
		f.next = stepElement
		return
	}
	f.next = stepField
}

func (f *Fields) nextElement() bool {
	a := &f.stack[f.depth]
	d := &a.def
	af := Encoding(d.enc) & EncodingArrayMask
	if a.index == a.count {
		f.depth--
		f.setItem(ItemArrayEnd, d)
		f.item.ArrayFlags = af
		f.item.ArrayIndex = a.index
		f.item.ArrayCount = a.count
		f.next = stepField
		return true
	}
	if Encoding(d.enc)&EncodingValueMask == EncodingStruct {
		if f.depth == MaxDepth {
			return f.fail("nesting deeper than %d", MaxDepth)
		}
		f.mpos = int(a.elemMeta)
		f.setItem(ItemStructBegin, d)
		f.item.ArrayFlags = af
		f.item.ArrayIndex = a.index
		f.item.ArrayCount = a.count
		f.depth++
		f.stack[f.depth] = frame{def: *d, remaining: int16(Format(d.format) & FormatValueMask)}
		f.next = stepField
		return true
	}
	f.setItem(ItemValue, d)
	f.item.ArrayFlags = af
	f.item.ArrayIndex = a.index
	f.item.ArrayCount = a.count
	a.index++
	return f.readValue(d)
}

// Uint returns a 1-, 2-, 4- or 8-byte value as an unsigned integer in the
// event's byte order; ok is false for other sizes. It reads value8..value64
// fields and counted binary of those sizes alike.
func (it *Item) Uint() (v uint64, ok bool) {
	bo := it.ByteOrder()
	switch len(it.Value) {
	case 1:
		return uint64(it.Value[0]), true
	case 2:
		return uint64(bo.Uint16(it.Value)), true
	case 4:
		return uint64(bo.Uint32(it.Value)), true
	case 8:
		return bo.Uint64(it.Value), true
	}
	return 0, false
}

// Int returns a 1-, 2-, 4- or 8-byte value as a signed integer, sign-extended.
func (it *Item) Int() (v int64, ok bool) {
	u, ok := it.Uint()
	switch len(it.Value) {
	case 1:
		return int64(int8(u)), ok
	case 2:
		return int64(int16(u)), ok
	case 4:
		return int64(int32(u)), ok
	}
	return int64(u), ok
}
