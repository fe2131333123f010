package report

import (
	"strconv"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/report/perfetto"
)

// EventHeader events (package eventheader) are written to tracepoints
// whose format holds only the 8-byte header (eventheader_flags, version,
// id, tag, opcode, level) and whose name is "<provider>_L<n>K<hex>…":
// their name and fields are in the record's own metadata. perfdata's
// Event finds out which events are and decodes their records; the report
// shows the event name, its fields formatted as Microsoft's decoder
// formats them (hex, errno, IP, UUID, time, booleans, strings, nested
// structs and arrays) and its metadata. A record that does not decode as
// EventHeader is shown by its format, like any tracepoint.

// appendEHName appends "Provider:Event".
func appendEHName(b []byte, e *eventheader.Event, json bool) []byte {
	if json {
		b = append(b, '"')
		b = appendJSONInner(b, []byte(e.Tracepoint.Provider))
		b = append(b, ':')
		b = appendJSONInner(b, e.EventName())
		return append(b, '"')
	}
	b = append(b, e.Tracepoint.Provider...)
	b = append(b, ':')
	return append(b, e.EventName()...)
}

// appendEHText appends the event's name and fields as text:
// " Provider:Event a=1 s={x=2 y="two words"} arr=[1 2 3]". Strings and
// other JSON string values are shown bare when they hold no space, quote,
// backslash, control byte or separator, and as JSON strings otherwise, so
// a line can be split back into its fields.
func appendEHText(b []byte, e *eventheader.Event) []byte {
	b = append(b, ' ')
	b = appendEHName(b, e, false)
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case eventheader.ItemArrayEnd:
			b = append(b, ']')
			continue
		case eventheader.ItemStructEnd:
			b = append(b, '}')
			continue
		}
		if c := b[len(b)-1]; c != '[' && c != '{' {
			b = append(b, ' ')
		}
		if it.ArrayFlags == 0 || it.Kind == eventheader.ItemArrayBegin {
			b = appendEHMember(b, it, false)
		}
		switch it.Kind {
		case eventheader.ItemArrayBegin:
			b = append(b, '[')
		case eventheader.ItemStructBegin:
			b = append(b, '{')
		case eventheader.ItemValue:
			start := len(b)
			b = bare(it.AppendJSON(b), start)
		}
	}
	if e.ActivityID != nil {
		b = append(b, " activity="...)
		b = eventheader.AppendUUID(b, e.ActivityID)
	}
	if e.RelatedActivityID != nil {
		b = append(b, " related="...)
		b = eventheader.AppendUUID(b, e.RelatedActivityID)
	}
	return b
}

// appendEHMember appends a field's name (with its tag, as Microsoft's
// decoder names it: "name;tag=0x12") and '=' for text or ':' for JSON.
func appendEHMember(b []byte, it *eventheader.Item, json bool) []byte {
	if json {
		b = appendJSONInner(b, it.Name)
	} else {
		b = append(b, it.Name...)
	}
	if it.Tag != 0 {
		b = append(b, ";tag=0x"...)
		b = eventheader.AppendHex(b, uint64(it.Tag))
	}
	if json {
		return append(b, '"', ':')
	}
	return append(b, '=')
}

// appendJSONInner appends s escaped for a JSON string, without quotes.
func appendJSONInner(b, s []byte) []byte {
	start := len(b)
	b = appendJSONBytes(b, s, false)
	copy(b[start:], b[start+1:len(b)-1])
	return b[:len(b)-2]
}

// bare removes the quotes of the JSON string b[start:] when what it holds
// reads unambiguously without them.
func bare(b []byte, start int) []byte {
	v := b[start:]
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return b
	}
	for _, c := range v[1 : len(v)-1] {
		switch {
		case c <= ' ', c == '"', c == '\\', c == '=', c == '[', c == ']', c == '{', c == '}', c == 0x7f:
			return b
		}
	}
	copy(b[start:], v[1:len(v)-1])
	return b[:len(b)-2]
}

// appendEHJSON appends the fields of the event as the members of a JSON
// object, in Microsoft's conventions but compact: `"a":1,"s":{"x":2},…`.
// Repeated names are kept, as the event has them.
func appendEHJSON(b []byte, e *eventheader.Event) []byte {
	first := true
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case eventheader.ItemArrayEnd:
			b = append(b, ']')
			continue
		case eventheader.ItemStructEnd:
			b = append(b, '}')
			continue
		}
		if c := b[len(b)-1]; !first && c != '[' && c != '{' {
			b = append(b, ',')
		}
		first = false
		if it.ArrayFlags == 0 || it.Kind == eventheader.ItemArrayBegin {
			b = appendEHMember(append(b, '"'), it, true)
		}
		switch it.Kind {
		case eventheader.ItemArrayBegin:
			b = append(b, '[')
		case eventheader.ItemStructBegin:
			b = append(b, '{')
		case eventheader.ItemValue:
			b = it.AppendJSON(b)
		}
	}
	return b
}

// appendEHMeta appends `,"event":"Provider:Event","meta":{…}`: the
// metadata members Microsoft's decoder shows, those that are set.
func appendEHMeta(b []byte, e *eventheader.Event) []byte {
	b = append(b, `,"event":`...)
	b = appendEHName(b, e, true)
	b = append(b, `,"meta":`...)
	return e.AppendMetaJSON(b, true)
}

// ehStr is a string argument whose value is ehText[start:end].
type ehStr struct{ arg, start, end int }

// ehActivity is an activity (an ActivityStart with an activity id) whose
// slice is open on an async track of its own.
type ehActivity struct {
	track perfetto.Track
	pool  ehPoolKey
	names []string // of the starts open on the track, innermost last
}

// ehPoolKey names the async tracks of one process and slice name: a track
// whose slices have all ended is reused by the next activity of the same
// name, so that a trace has as many tracks per name as activities ever
// overlapped, not one per activity.
type ehPoolKey struct {
	pid  int32
	name string
}

// ehStopPrefix prefixes the names of an ActivityStop's annotations, which
// the trace processor adds to the arguments of the slice it ends: they
// must not be confused with the start's.
const ehStopPrefix = "stop"

// ehEvent writes a sample of an EventHeader event to Perfetto: an
// ActivityStart begins a slice, an ActivityStop ends one, and any other
// event, or a stop with no slice to end, is an instant.
//
// A start with an activity id begins a slice on an async track of the
// process, named "Provider:Event", that no other open activity uses; the
// stop with the same activity id ends it, on whatever thread or process it
// comes. A start without one begins a slice on its thread's track, which
// the next stop of that thread without one ends: the innermost open
// slice, as Perfetto pairs them.
func (rp *reporter) ehEvent(it *item, e *eventheader.Event, ts uint64) error {
	key := uint64(uint32(it.pid))<<32 | uint64(uint32(it.tid))
	switch e.Header.Opcode {
	case eventheader.OpcodeActivityStart:
		name := rp.ehArgs(e, "")
		var tr perfetto.Track
		if e.ActivityID != nil {
			a, err := rp.ehStartActivity(it.pid, name, e.ActivityID)
			if err != nil {
				return err
			}
			tr = a.track
			a.names = append(a.names, name)
		} else {
			var err error
			if tr, err = rp.pf.ThreadTrack(it.pid, it.tid); err != nil {
				return err
			}
			if rp.ehThreads == nil {
				rp.ehThreads = make(map[uint64][]string)
			}
			rp.ehThreads[key] = append(rp.ehThreads[key], name)
		}
		return rp.pf.Begin(ts, tr, it.ev.system, name, rp.args)
	case eventheader.OpcodeActivityStop:
		var tr perfetto.Track
		var open []string
		var a *ehActivity
		if e.ActivityID != nil {
			a = rp.ehActs[[16]byte(e.ActivityID)]
		}
		if a != nil {
			tr, open = a.track, a.names
		} else if e.ActivityID == nil {
			if open = rp.ehThreads[key]; len(open) > 0 {
				var err error
				if tr, err = rp.pf.ThreadTrack(it.pid, it.tid); err != nil {
					return err
				}
			}
		}
		if len(open) == 0 {
			rp.sum.UnmatchedStops++
			break
		}
		started := open[len(open)-1]
		name := rp.ehArgs(e, ehStopPrefix)
		if name != started {
			rp.args = append(rp.args, perfetto.String(ehStopPrefix+".event", name))
		}
		if err := rp.pf.End(ts, tr, rp.args); err != nil {
			return err
		}
		open = open[:len(open)-1]
		switch {
		case a == nil:
			rp.ehThreads[key] = open
		case len(open) > 0:
			a.names = open
		default:
			delete(rp.ehActs, [16]byte(e.ActivityID))
			rp.ehPools[a.pool] = append(rp.ehPools[a.pool], a.track)
			a.names = open
			rp.ehFree = append(rp.ehFree, a)
		}
		return nil
	}
	name := rp.ehArgs(e, "")
	return rp.pf.Instant(ts, it.pid, it.tid, it.ev.system, name, rp.args)
}

// ehStartActivity returns the open activity id, or opens it on a free
// async track of process pid named name.
func (rp *reporter) ehStartActivity(pid int32, name string, id []byte) (*ehActivity, error) {
	if a := rp.ehActs[[16]byte(id)]; a != nil {
		return a, nil // started again while open: nested on its track
	}
	key := ehPoolKey{pid, name}
	var a *ehActivity
	if n := len(rp.ehFree); n > 0 {
		// Reused, with its names' array: an activity a sample costs no
		// allocation once as many have been open at once.
		a, rp.ehFree = rp.ehFree[n-1], rp.ehFree[:n-1]
		a.pool = key
	} else {
		a = &ehActivity{pool: key}
	}
	if free := rp.ehPools[key]; len(free) > 0 {
		a.track, rp.ehPools[key] = free[len(free)-1], free[:len(free)-1]
	} else {
		var err error
		if a.track, err = rp.pf.AsyncTrack(pid, name); err != nil {
			return nil, err
		}
		if rp.ehPools == nil {
			rp.ehPools = make(map[ehPoolKey][]perfetto.Track)
		}
	}
	if rp.ehActs == nil {
		rp.ehActs = make(map[[16]byte]*ehActivity)
	}
	rp.ehActs[[16]byte(id)] = a
	return a, nil
}

// ehArgs sets rp.args to the fields of the event as debug annotations
// flattened by path ("s.x", "arr[2]"), then the metadata ("meta.level",
// …), each name after prefix and a dot if prefix is not empty, and returns
// the event's name, "Provider:Event". Integers of the default, unsigned,
// signed and pid formats are numbers, and so are ports; booleans 0 and 1
// are booleans; everything else is the text of its JSON value.
func (rp *reporter) ehArgs(e *eventheader.Event, prefix string) string {
	rp.args = rp.args[:0]
	rp.ehText = rp.ehText[:0]
	rp.ehStrs = rp.ehStrs[:0]
	path, stack := append(rp.ehPath[:0], prefix...), rp.ehStack[:0]
	str := func(name string, start int) {
		rp.ehStrs = append(rp.ehStrs, ehStr{len(rp.args), start, len(rp.ehText)})
		rp.args = append(rp.args, perfetto.String(name, ""))
	}
	f := e.Fields()
	for f.Next() {
		item := f.Item()
		switch item.Kind {
		case eventheader.ItemArrayEnd, eventheader.ItemStructEnd:
			if n := len(stack); n > 0 {
				path, stack = path[:stack[n-1]], stack[:n-1]
			}
			continue
		}
		mark := len(path)
		if item.ArrayFlags == 0 || item.Kind == eventheader.ItemArrayBegin {
			if len(path) > 0 {
				path = append(path, '.')
			}
			path = append(path, item.Name...)
			if item.Tag != 0 {
				path = append(path, ";tag=0x"...)
				path = eventheader.AppendHex(path, uint64(item.Tag))
			}
		} else {
			path = append(path, '[')
			path = strconv.AppendUint(path, uint64(item.ArrayIndex), 10)
			path = append(path, ']')
		}
		if item.Kind != eventheader.ItemValue {
			stack = append(stack, mark)
			continue
		}
		name := rp.ehName(path)
		switch {
		case isEHInt(item, eventheader.FormatSignedInt):
			v, _ := item.Int()
			rp.args = append(rp.args, perfetto.Int(name, v))
		case isEHInt(item, eventheader.FormatDefault), isEHInt(item, eventheader.FormatUnsignedInt), isEHInt(item, eventheader.FormatPid):
			v, _ := item.Uint()
			rp.args = append(rp.args, perfetto.Uint(name, v))
		case isEHInt(item, eventheader.FormatPort) && len(item.Value) == 2:
			rp.args = append(rp.args, perfetto.Uint(name, uint64(item.Value[0])<<8|uint64(item.Value[1])))
		case isEHInt(item, eventheader.FormatBoolean) && len(item.Value) <= 4:
			v, _ := item.Uint()
			if v <= 1 {
				rp.args = append(rp.args, perfetto.Bool(name, v == 1))
			} else {
				rp.args = append(rp.args, perfetto.Int(name, int64(int32(v))))
			}
		default:
			start := len(rp.ehText)
			rp.ehText = unquoteJSON(item.AppendJSON(rp.ehText), start)
			str(name, start)
		}
		path = path[:mark]
	}
	rp.ehPath, rp.ehStack = path, stack
	meta := func(name string) string {
		if prefix == "" {
			return name
		}
		rp.ehPath = append(append(append(rp.ehPath[:0], prefix...), '.'), name...)
		return rp.ehName(rp.ehPath)
	}
	h := &e.Header
	for _, m := range [...]struct {
		name string
		v    uint64
	}{{"meta.id", uint64(h.ID)}, {"meta.version", uint64(h.Version)}, {"meta.level", uint64(h.Level)}, {"meta.opcode", uint64(h.Opcode)}} {
		if m.v != 0 {
			rp.args = append(rp.args, perfetto.Uint(meta(m.name), m.v))
		}
	}
	if k := e.Tracepoint.Keyword; k != 0 {
		start := len(rp.ehText)
		rp.ehText = eventheader.AppendHex(append(rp.ehText, "0x"...), k)
		str(meta("meta.keyword"), start)
	}
	if h.Tag != 0 {
		start := len(rp.ehText)
		rp.ehText = eventheader.AppendHex(append(rp.ehText, "0x"...), uint64(h.Tag))
		str(meta("meta.tag"), start)
	}
	if e.ActivityID != nil {
		start := len(rp.ehText)
		rp.ehText = eventheader.AppendUUID(rp.ehText, e.ActivityID)
		str(meta("meta.activity"), start)
	}
	if e.RelatedActivityID != nil {
		start := len(rp.ehText)
		rp.ehText = eventheader.AppendUUID(rp.ehText, e.RelatedActivityID)
		str(meta("meta.relatedActivity"), start)
	}
	for _, s := range rp.ehStrs {
		rp.args[s.arg].Str = view(rp.ehText[s.start:s.end])
	}
	rp.ehPath = appendEHName(rp.ehPath[:0], e, false)
	return rp.ehName(rp.ehPath)
}

// isEHInt reports whether item is a value8..value64 of format f.
func isEHInt(item *eventheader.Item, f eventheader.Format) bool {
	switch item.Encoding {
	case eventheader.EncodingValue8, eventheader.EncodingValue16, eventheader.EncodingValue32, eventheader.EncodingValue64:
		return item.Format == f
	}
	return false
}

// ehNameMax bounds the names a report keeps for Perfetto: past it, names
// are made anew for each use.
const ehNameMax = 1 << 16

// ehName returns name as a string that is never changed, as the Perfetto
// writer requires of names, made once per distinct name.
func (rp *reporter) ehName(name []byte) string {
	if s, ok := rp.ehNames[string(name)]; ok {
		return s
	}
	s := string(name)
	if rp.ehNames == nil {
		rp.ehNames = make(map[string]string)
	}
	if len(rp.ehNames) < ehNameMax {
		rp.ehNames[s] = s
	}
	return s
}

// unquoteJSON replaces the JSON string b[start:], if it is one, by the
// text it holds.
func unquoteJSON(b []byte, start int) []byte {
	v := b[start:]
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return b
	}
	out := start
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		if c != '\\' || i+1 >= len(v)-1 {
			b[out] = c
			out++
			continue
		}
		i++
		switch v[i] {
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'u':
			if i+4 < len(v)-1 {
				r, err := strconv.ParseUint(string(v[i+1:i+5]), 16, 16)
				if err == nil {
					// Escaped runes are control characters and halves of
					// surrogate pairs; the latter become U+FFFD.
					if r >= 0xd800 && r < 0xe000 {
						r = 0xfffd
					}
					out += utf8.EncodeRune(b[out:], rune(r))
					i += 4
					continue
				}
			}
			c = 'u'
		default:
			c = v[i] // '"', '\\', '/'
		}
		b[out] = c
		out++
	}
	return b[:out]
}
