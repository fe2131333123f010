package export

import (
	"strings"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventheader"
)

// An ehLayout is what the mapping derives once from an EventHeader
// event's layout — its provider and its metadata (the event's name and
// field definitions) — for every event of it: the record's event name,
// its fields' names made keys (valid UTF-8, attributes cut, copied: kept
// by a Writer as they are), how many attributes its records or spans had
// at most, the room the next is given, and whether it is not Common
// Schema's. A program writes a few layouts
// millions of times; each field's name would otherwise be checked, cut
// and copied (or looked up) for every event.
type ehLayout struct {
	provider, meta string // what the layout is of: the metadata copied
	eventName      string // "Provider:Event"
	// keys are the keys of the fields met so far, and idx says which is a
	// field's, by its definition's offset in the metadata (Item.DefOffset):
	// 1 + its index in keys, 0 while not yet met. A layout's keys are
	// found as its events are read, the same for each.
	idx   []uint16
	keys  []string
	attrs int
	// defs are its field definitions as the fields' iterations read them
	// (eventheader.Defs): read once, not for each event. They take 2
	// bytes a metadata byte and 12 a field.
	defs eventheader.Defs
	// notCS says that the layout is not a Common Schema record's: it has
	// no fields, or its first is not __csver__ (scanCS's csNot).
	notCS bool
}

// Bounds of an encoder's layouts: a program that makes layouts anew for
// every event (a field name of its data, say) must not grow the reader;
// past them, events are mapped without a layout, as before one is made.
const (
	maxLayouts    = 1024
	maxLayoutMeta = 4096    // the longest metadata a layout is made for
	maxLayoutSize = 1 << 20 // the metadata bytes of all of them
)

// layouts are an encoder's EventHeader layouts, by provider and metadata.
type layouts struct {
	last  *ehLayout // the last one found: events of one layout come in runs
	m     map[string]*ehLayout
	size  int
	scrap []byte // the map's key being looked up: provider, NUL, metadata
}

// get returns the layout of eh, made the first time; nil when the
// bounds allow no more.
func (ls *layouts) get(eh *eventheader.Event) *ehLayout {
	provider, meta := eh.Tracepoint.Provider, eh.Metadata()
	if l := ls.last; l != nil && l.meta == string(meta) && l.provider == provider {
		return l
	}
	ls.scrap = append(append(append(ls.scrap[:0], provider...), 0), meta...)
	if l := ls.m[string(ls.scrap)]; l != nil { // the lookup does not copy
		ls.last = l
		return l
	}
	if len(meta) > maxLayoutMeta || len(ls.m) >= maxLayouts || ls.size+len(meta) > maxLayoutSize {
		return nil
	}
	if ls.m == nil {
		ls.m = make(map[string]*ehLayout)
	}
	name := eh.EventName()
	if !utf8.Valid(name) {
		name = []byte(strings.ToValidUTF8(string(name), "\uFFFD"))
	}
	l := &ehLayout{provider: provider, meta: string(meta), eventName: provider + ":" + string(name),
		idx: make([]uint16, len(meta))}
	ls.m[string(ls.scrap)] = l
	ls.size += len(meta)
	ls.last = l
	return l
}

// key is the attribute key of an item of an event of this layout.
func (l *ehLayout) key(it *eventheader.Item) string {
	off := it.DefOffset()
	if i := l.idx[off]; i > 0 {
		return l.keys[i-1]
	}
	k := strings.Clone(validText(it.FieldName()))
	l.keys = append(l.keys, k)
	l.idx[off] = uint16(len(l.keys))
	return k
}

// maxInterned bounds an interner: the strings that repeat are few, and a
// program that names its fields anew each time must not grow the reader.
const maxInterned = 4096

// interner keeps one copy of each string it is given, up to maxInterned;
// past them, a string it does not hold is copied each time.
type interner map[string]string

func (in interner) get(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if len(in) < maxInterned {
		in[v] = v
	}
	return v
}
