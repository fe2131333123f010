package ehprovider_test

import (
	"bytes"
	"context"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
	"pgregory.net/rapid"
)

// The property test of the typed path: for every Value type, at every
// arity, with random values, names, header options, activity ids and
// struct groupings, a typed write's bytes are what eventheader.Builder
// writes for the same definitions and values (calls of its public API
// only, made here), and eventheader.Decode gives the values back.

// harness is an in-process provider whose tracepoints a session reads.
type harness struct {
	t   *testing.T
	p   *ehprovider.Provider
	ss  *subsys.Session
	buf []byte
}

func newHarness(t *testing.T) *harness {
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p, err := ehprovider.New(f, "Prop", nil)
	if err != nil {
		t.Fatal(err)
	}
	ss := sys.NewSession(subsys.SessionOptions{})
	t.Cleanup(func() { ss.Close() })
	if _, err := ss.AttachMatching("user_events:Prop_*", true); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, p: p, ss: ss, buf: make([]byte, 1<<20)}
}

// read returns the one record written since the last read, after its
// common header: the event and perf's zero padding.
func (h *harness) read(rt *rapid.T) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := h.ss.Read(ctx, h.buf, nil)
	if err != nil || len(recs) != 1 {
		rt.Fatalf("read: %d records, %v", len(recs), err)
	}
	return recs[0].Raw[8:]
}

// span is a struct grouping fields first..first+n-1.
type span struct {
	name     string
	first, n int
}

// node is a field (field ≥ 0) or a struct of nodes, in metadata order.
type node struct {
	name  string
	field int
	kids  []node
}

// tree nests the fields lo..hi-1 in the spans (sorted: first ascending,
// outer before inner, all within lo..hi-1 and nesting).
func tree(spans []span, lo, hi int) []node {
	var out []node
	for i := lo; i < hi; {
		if len(spans) > 0 && spans[0].first == i {
			s := spans[0]
			end := s.first + s.n
			j := 1
			for j < len(spans) && spans[j].first < end {
				j++
			}
			out = append(out, node{name: s.name, field: -1, kids: tree(spans[1:j], s.first, end)})
			spans = spans[j:]
			i = end
			continue
		}
		out = append(out, node{field: i})
		i++
	}
	return out
}

// drawSpans draws struct groupings of n fields that nest.
func drawSpans(rt *rapid.T, n int) []span {
	var spans []span
	for k := rapid.IntRange(0, 3).Draw(rt, "structs"); k > 0; k-- {
		first := rapid.IntRange(0, n-1).Draw(rt, "first")
		s := span{name: rapid.SampledFrom([]string{"s", "t;a=b", "構造"}).Draw(rt, "sname"),
			first: first, n: rapid.IntRange(1, n-first).Draw(rt, "n")}
		ok := true
		for _, o := range spans {
			apart := s.first+s.n <= o.first || o.first+o.n <= s.first
			inside := s.first >= o.first && s.first+s.n <= o.first+o.n
			outside := o.first >= s.first && o.first+o.n <= s.first+s.n
			ok = ok && (apart || inside || outside) && s != o
		}
		if ok {
			spans = append(spans, s)
		}
	}
	return spans
}

// buildEvent writes with eventheader.Builder's public API the event a
// typed write of vals with these options should write.
func buildEvent(rt *rapid.T, name string, h eventheader.Header, id, related *[16]byte, names []string, vals []any, nodes []node) []byte {
	var b eventheader.Builder
	b.Reset(name, h)
	if id != nil {
		b.SetActivityID(id, related)
	}
	var emit func([]node)
	emit = func(ns []node) {
		for _, n := range ns {
			if n.field < 0 {
				b.StructField(n.name, len(n.kids), 0)
				emit(n.kids)
				continue
			}
			addField(rt, &b, names[n.field], vals[n.field])
		}
	}
	emit(nodes)
	ev, err := b.AppendEvent(nil)
	if err != nil {
		rt.Fatalf("builder: %v", err)
	}
	return ev
}

// addField defines and appends a field as the Builder's user would.
func addField(rt *rapid.T, b *eventheader.Builder, name string, v any) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		if _, ok := v.([]byte); ok {
			b.AddBinary(name, v.([]byte)[:min(len(v.([]byte)), math.MaxUint16)], 0, 0)
			return
		}
		n := min(rv.Len(), math.MaxUint16)
		enc, f := encodingFormat(rv.Type().Elem())
		b.ArrayField(name, enc, f, 0, 0)
		b.AppendCount(uint16(n))
		for i := range n {
			appendElem(rt, b, rv.Index(i).Interface())
		}
		return
	}
	switch v := v.(type) {
	case bool:
		b.AddBool(name, v, 0)
	case int8:
		b.AddUint8(name, uint8(v), eventheader.FormatSignedInt, 0)
	case int16:
		b.AddUint16(name, uint16(v), eventheader.FormatSignedInt, 0)
	case int32:
		b.AddInt32(name, v, 0)
	case int64:
		b.AddInt64(name, v, 0)
	case int:
		b.AddInt64(name, int64(v), 0)
	case uint8:
		b.AddUint8(name, v, 0, 0)
	case uint16:
		b.AddUint16(name, v, 0, 0)
	case uint32:
		b.AddUint32(name, v, 0, 0)
	case uint64:
		b.AddUint64(name, v, 0, 0)
	case uint:
		b.AddUint64(name, uint64(v), 0, 0)
	case uintptr:
		b.AddUint64(name, uint64(v), 0, 0)
	case float32:
		b.AddFloat32(name, v, 0)
	case float64:
		b.AddFloat64(name, v, 0)
	case string:
		b.AddString(name, v[:min(len(v), math.MaxUint16)], 0, 0)
	case ehprovider.Hex32:
		b.AddUint32(name, uint32(v), eventheader.FormatHexInt, 0)
	case ehprovider.Hex64:
		b.AddUint64(name, uint64(v), eventheader.FormatHexInt, 0)
	case ehprovider.Errno:
		b.AddUint32(name, uint32(v), eventheader.FormatErrno, 0)
	case ehprovider.PID:
		b.AddUint32(name, uint32(v), eventheader.FormatPid, 0)
	case ehprovider.UUID:
		b.AddUUID(name, v, 0)
	case time.Time:
		b.AddUint64(name, uint64(v.Unix()), eventheader.FormatTime, 0)
	default:
		rt.Fatalf("no Builder equivalent of %T", v)
	}
}

// encodingFormat is the encoding and format of an array's element type.
func encodingFormat(t reflect.Type) (eventheader.Encoding, eventheader.Format) {
	switch t {
	case reflect.TypeFor[bool]():
		return eventheader.EncodingValue8, eventheader.FormatBoolean
	case reflect.TypeFor[int8]():
		return eventheader.EncodingValue8, eventheader.FormatSignedInt
	case reflect.TypeFor[int16]():
		return eventheader.EncodingValue16, eventheader.FormatSignedInt
	case reflect.TypeFor[int32]():
		return eventheader.EncodingValue32, eventheader.FormatSignedInt
	case reflect.TypeFor[int64](), reflect.TypeFor[int]():
		return eventheader.EncodingValue64, eventheader.FormatSignedInt
	case reflect.TypeFor[uint16]():
		return eventheader.EncodingValue16, 0
	case reflect.TypeFor[uint32]():
		return eventheader.EncodingValue32, 0
	case reflect.TypeFor[uint64](), reflect.TypeFor[uint](), reflect.TypeFor[uintptr]():
		return eventheader.EncodingValue64, 0
	case reflect.TypeFor[float32]():
		return eventheader.EncodingValue32, eventheader.FormatFloat
	case reflect.TypeFor[float64]():
		return eventheader.EncodingValue64, eventheader.FormatFloat
	case reflect.TypeFor[string]():
		return eventheader.EncodingStringLength16Char8, 0
	case reflect.TypeFor[ehprovider.Hex32]():
		return eventheader.EncodingValue32, eventheader.FormatHexInt
	case reflect.TypeFor[ehprovider.Hex64]():
		return eventheader.EncodingValue64, eventheader.FormatHexInt
	case reflect.TypeFor[ehprovider.Errno]():
		return eventheader.EncodingValue32, eventheader.FormatErrno
	case reflect.TypeFor[ehprovider.PID]():
		return eventheader.EncodingValue32, eventheader.FormatPid
	case reflect.TypeFor[ehprovider.UUID]():
		return eventheader.EncodingValue128, eventheader.FormatUUID
	case reflect.TypeFor[time.Time]():
		return eventheader.EncodingValue64, eventheader.FormatTime
	}
	panic("no array of " + t.String())
}

// appendElem appends one array element's value.
func appendElem(rt *rapid.T, b *eventheader.Builder, v any) {
	switch v := v.(type) {
	case bool:
		var u uint8
		if v {
			u = 1
		}
		b.AppendValue8(u)
	case int8:
		b.AppendValue8(uint8(v))
	case int16:
		b.AppendValue16(uint16(v))
	case int32:
		b.AppendValue32(uint32(v))
	case int64:
		b.AppendValue64(uint64(v))
	case int:
		b.AppendValue64(uint64(v))
	case uint16:
		b.AppendValue16(v)
	case uint32:
		b.AppendValue32(v)
	case uint64:
		b.AppendValue64(v)
	case uint:
		b.AppendValue64(uint64(v))
	case uintptr:
		b.AppendValue64(uint64(v))
	case float32:
		b.AppendValue32(math.Float32bits(v))
	case float64:
		b.AppendValue64(math.Float64bits(v))
	case string:
		b.AppendString8(v[:min(len(v), math.MaxUint16)])
	case ehprovider.Hex32:
		b.AppendValue32(uint32(v))
	case ehprovider.Hex64:
		b.AppendValue64(uint64(v))
	case ehprovider.Errno:
		b.AppendValue32(uint32(v))
	case ehprovider.PID:
		b.AppendValue32(uint32(v))
	case ehprovider.UUID:
		b.AppendRaw(v[:])
	case time.Time:
		b.AppendValue64(uint64(v.Unix()))
	default:
		rt.Fatalf("no Builder element of %T", v)
	}
}

// Decoded values, typed by what their format says they are.
type (
	f32      uint32 // float bits: NaN compares equal to itself
	f64      uint64
	bin      string
	hex      uint64
	errno    int64
	pid      int64
	unixTime int64
)

// canon is the value a decoder should give for v.
func canon(v any) any {
	switch v := v.(type) {
	case bool:
		return v
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	case uint8:
		return uint64(v)
	case uint16:
		return uint64(v)
	case uint32:
		return uint64(v)
	case uint64:
		return v
	case uint:
		return uint64(v)
	case uintptr:
		return uint64(v)
	case float32:
		return f32(math.Float32bits(v))
	case float64:
		return f64(math.Float64bits(v))
	case string:
		return v[:min(len(v), math.MaxUint16)]
	case []byte:
		return bin(v[:min(len(v), math.MaxUint16)])
	case ehprovider.Hex32:
		return hex(v)
	case ehprovider.Hex64:
		return hex(v)
	case ehprovider.Errno:
		return errno(v)
	case ehprovider.PID:
		return pid(v)
	case ehprovider.UUID:
		return [16]byte(v)
	case time.Time:
		return unixTime(v.Unix())
	}
	rv := reflect.ValueOf(v) // an array
	out := []any{}
	for i := range min(rv.Len(), math.MaxUint16) {
		out = append(out, canon(rv.Index(i).Interface()))
	}
	return out
}

// decodeItem is the value of a decoded scalar or array element.
func decodeItem(it *eventheader.Item) any {
	u, _ := it.Uint()
	i, _ := it.Int()
	switch it.Encoding {
	case eventheader.EncodingStringLength16Char8:
		return string(it.Value)
	case eventheader.EncodingBinaryLength16Char8:
		return bin(it.Value)
	case eventheader.EncodingValue128:
		return [16]byte(it.Value)
	}
	switch it.Format {
	case eventheader.FormatBoolean:
		return u != 0
	case eventheader.FormatSignedInt:
		return i
	case eventheader.FormatFloat:
		if len(it.Value) == 4 {
			return f32(u)
		}
		return f64(u)
	case eventheader.FormatHexInt:
		return hex(u)
	case eventheader.FormatErrno:
		return errno(i)
	case eventheader.FormatPid:
		return pid(i)
	case eventheader.FormatTime:
		return unixTime(i)
	}
	return u
}

// dnode is a decoded field: a value, or a struct's fields.
type dnode struct {
	Name  string
	Value any
	Kids  []dnode
}

func want(nodes []node, names []string, vals []any) []dnode {
	var out []dnode
	for _, n := range nodes {
		if n.field < 0 {
			out = append(out, dnode{Name: n.name, Kids: want(n.kids, names, vals)})
		} else {
			out = append(out, dnode{Name: names[n.field], Value: canon(vals[n.field])})
		}
	}
	return out
}

// decodeFields is the event's field tree as eventheader.Decode gives it.
func decodeFields(rt *rapid.T, ev *eventheader.Event) []dnode {
	stack := [][]dnode{nil}
	var names []string
	var arr []any
	it := ev.Fields()
	for it.Next() {
		item := it.Item()
		top := len(stack) - 1
		switch item.Kind {
		case eventheader.ItemValue:
			if item.ArrayFlags != 0 {
				arr = append(arr, decodeItem(item))
			} else {
				stack[top] = append(stack[top], dnode{Name: string(item.Name), Value: decodeItem(item)})
			}
		case eventheader.ItemArrayBegin:
			if item.ArrayFlags != eventheader.EncodingVArray {
				rt.Fatalf("array %q: flags %v", item.Name, item.ArrayFlags)
			}
			arr = []any{}
		case eventheader.ItemArrayEnd:
			stack[top] = append(stack[top], dnode{Name: string(item.Name), Value: arr})
			arr = nil
		case eventheader.ItemStructBegin:
			names = append(names, string(item.Name))
			stack = append(stack, nil)
		case eventheader.ItemStructEnd:
			s := dnode{Name: names[len(names)-1], Kids: stack[top]}
			names = names[:len(names)-1]
			stack = stack[:top]
			stack[top-1] = append(stack[top-1], s)
		}
	}
	if err := it.Err(); err != nil {
		rt.Fatalf("decode fields: %v", err)
	}
	return stack[0]
}

// others are the values of the fields beside the one under test.
type others struct {
	s    string
	u32s []uint32
	b    bool
	ss   []string
	id   ehprovider.UUID
}

func drawOthers(rt *rapid.T) others {
	return others{
		s:    rapid.String().Draw(rt, "s"),
		u32s: rapid.SliceOfN(rapid.Uint32(), 0, 8).Draw(rt, "u32s"),
		b:    rapid.Bool().Draw(rt, "b"),
		ss:   rapid.SliceOfN(rapid.String(), 0, 4).Draw(rt, "ss"),
		id:   rapid.Make[ehprovider.UUID]().Draw(rt, "id"),
	}
}

// checkType checks the typed path for fields of type T, drawn by gen: T
// alone (Define1), first beside others of fixed types (Define2 ...
// Define6), and last of six (Define6).
func checkType[T ehprovider.Value](t *testing.T, h *harness, gen *rapid.Generator[T]) {
	lv := eventheader.LevelVerbose
	const kw = 0x10
	tp := h.p.Tracepoint(lv, kw)
	rapid.Check(t, func(rt *rapid.T) {
		v := gen.Draw(rt, "v")
		o := drawOthers(rt)
		arity := rapid.IntRange(1, 7).Draw(rt, "arity")
		n := min(arity, 6)
		names := make([]string, n)
		for i := range names {
			names[i] = rapid.SampledFrom([]string{"f", "g", "名前", "x;attr=1", ""}).Draw(rt, "fname")
		}
		name := rapid.SampledFrom([]string{"E", "Event;k=v", "イベント"}).Draw(rt, "name")
		hdr := eventheader.Header{Level: lv}
		var opts []ehprovider.EventOption
		if rapid.Bool().Draw(rt, "header") {
			hdr.ID = rapid.Uint16().Draw(rt, "id")
			hdr.Version = rapid.Uint8().Draw(rt, "version")
			hdr.Tag = rapid.Uint16().Draw(rt, "tag")
			hdr.Opcode = eventheader.Opcode(rapid.IntRange(0, 2).Draw(rt, "opcode"))
			opts = append(opts, ehprovider.WithID(hdr.ID, hdr.Version), ehprovider.WithTag(hdr.Tag), ehprovider.WithOpcode(hdr.Opcode))
		}
		spans := drawSpans(rt, n)
		for _, s := range spans {
			opts = append(opts, ehprovider.WithStruct(s.name, s.first, s.n))
		}
		var id, related *[16]byte
		switch rapid.IntRange(0, 2).Draw(rt, "activity") {
		case 2:
			related = new([16]byte)
			*related = rapid.Make[[16]byte]().Draw(rt, "related")
			fallthrough
		case 1:
			id = new([16]byte)
			*id = rapid.Make[[16]byte]().Draw(rt, "activity id")
		}
		bigEndianPath := rapid.Bool().Draw(rt, "big-endian path")
		defer ehprovider.SetHostLE(!bigEndianPath)()

		var vals []any
		var err error
		switch arity {
		case 1:
			vals = []any{v}
			err = ehprovider.Define1[T](h.p, name, lv, kw, names[0], opts...).WriteActivity(id, related, v)
		case 2:
			vals = []any{v, o.s}
			err = ehprovider.Define2[T, string](h.p, name, lv, kw, names[0], names[1], opts...).WriteActivity(id, related, v, o.s)
		case 3:
			vals = []any{v, o.s, o.u32s}
			err = ehprovider.Define3[T, string, []uint32](h.p, name, lv, kw, names[0], names[1], names[2], opts...).
				WriteActivity(id, related, v, o.s, o.u32s)
		case 4:
			vals = []any{v, o.s, o.u32s, o.b}
			err = ehprovider.Define4[T, string, []uint32, bool](h.p, name, lv, kw, names[0], names[1], names[2], names[3], opts...).
				WriteActivity(id, related, v, o.s, o.u32s, o.b)
		case 5:
			vals = []any{v, o.s, o.u32s, o.b, o.ss}
			err = ehprovider.Define5[T, string, []uint32, bool, []string](h.p, name, lv, kw, names[0], names[1], names[2], names[3], names[4], opts...).
				WriteActivity(id, related, v, o.s, o.u32s, o.b, o.ss)
		case 6:
			vals = []any{v, o.s, o.u32s, o.b, o.ss, o.id}
			ev := ehprovider.Define6[T, string, []uint32, bool, []string, ehprovider.UUID](h.p, name, lv, kw, names[0], names[1], names[2], names[3], names[4], names[5], opts...)
			if id == nil {
				err = ev.Write(v, o.s, o.u32s, o.b, o.ss, o.id)
			} else {
				err = ev.WriteActivity(id, related, v, o.s, o.u32s, o.b, o.ss, o.id)
			}
		case 7:
			vals = []any{o.id, o.ss, o.b, o.u32s, o.s, v}
			err = ehprovider.Define6[ehprovider.UUID, []string, bool, []uint32, string, T](h.p, name, lv, kw, names[0], names[1], names[2], names[3], names[4], names[5], opts...).
				WriteActivity(id, related, o.id, o.ss, o.b, o.u32s, o.s, v)
		}
		if err != nil {
			rt.Fatalf("typed write: %v", err)
		}
		got := h.read(rt)

		slices.SortStableFunc(spans, func(a, b span) int {
			if a.first != b.first {
				return a.first - b.first
			}
			return b.n - a.n
		})
		nodes := tree(spans, 0, n)
		built := buildEvent(rt, name, hdr, id, related, names, vals, nodes)
		// The record is the event and perf's padding: zeros, so that
		// the raw size is 4 modulo 8.
		if len(got) < len(built) || !bytes.Equal(got[:len(built)], built) ||
			len(got)-len(built) >= 8 || !bytes.Equal(got[len(built):], make([]byte, len(got)-len(built))) {
			rt.Fatalf("typed\n% x\nbuilder\n% x", got, built)
		}

		ev, err := eventheader.Decode(tp.Name(), built)
		if err != nil {
			rt.Fatalf("decode: %v", err)
		}
		hdr.Flags = ev.Header.Flags
		if ev.Header != hdr || string(ev.Name) != name {
			rt.Fatalf("decoded %q %+v, want %q %+v", ev.Name, ev.Header, name, hdr)
		}
		if id != nil && !bytes.Equal(ev.ActivityID, id[:]) || id == nil && ev.ActivityID != nil {
			rt.Fatalf("activity id % x, want %v", ev.ActivityID, id)
		}
		if related != nil && !bytes.Equal(ev.RelatedActivityID, related[:]) || related == nil && ev.RelatedActivityID != nil {
			rt.Fatalf("related id % x, want %v", ev.RelatedActivityID, related)
		}
		if d, w := decodeFields(rt, &ev), want(nodes, names, vals); !reflect.DeepEqual(d, w) {
			rt.Fatalf("decoded\n%#v\nwant\n%#v", d, w)
		}
	})
}

func timeGen() *rapid.Generator[time.Time] {
	return rapid.Custom(func(rt *rapid.T) time.Time {
		return time.Unix(rapid.Int64().Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "nsec"))
	})
}

// TestTypedProperty runs checkType for every Value type.
func TestTypedProperty(t *testing.T) {
	h := newHarness(t)
	run := func(name string, f func(t *testing.T)) { t.Run(name, f) }
	run("bool", func(t *testing.T) { checkType(t, h, rapid.Bool()) })
	run("int8", func(t *testing.T) { checkType(t, h, rapid.Int8()) })
	run("int16", func(t *testing.T) { checkType(t, h, rapid.Int16()) })
	run("int32", func(t *testing.T) { checkType(t, h, rapid.Int32()) })
	run("int64", func(t *testing.T) { checkType(t, h, rapid.Int64()) })
	run("int", func(t *testing.T) { checkType(t, h, rapid.Int()) })
	run("uint8", func(t *testing.T) { checkType(t, h, rapid.Uint8()) })
	run("uint16", func(t *testing.T) { checkType(t, h, rapid.Uint16()) })
	run("uint32", func(t *testing.T) { checkType(t, h, rapid.Uint32()) })
	run("uint64", func(t *testing.T) { checkType(t, h, rapid.Uint64()) })
	run("uint", func(t *testing.T) { checkType(t, h, rapid.Uint()) })
	run("uintptr", func(t *testing.T) { checkType(t, h, rapid.Uintptr()) })
	run("float32", func(t *testing.T) { checkType(t, h, rapid.Float32()) })
	run("float64", func(t *testing.T) { checkType(t, h, rapid.Float64()) })
	run("string", func(t *testing.T) { checkType(t, h, rapid.String()) })
	run("bytes", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Byte())) })
	run("Hex32", func(t *testing.T) { checkType(t, h, rapid.Make[ehprovider.Hex32]()) })
	run("Hex64", func(t *testing.T) { checkType(t, h, rapid.Make[ehprovider.Hex64]()) })
	run("Errno", func(t *testing.T) { checkType(t, h, rapid.Make[ehprovider.Errno]()) })
	run("PID", func(t *testing.T) { checkType(t, h, rapid.Make[ehprovider.PID]()) })
	run("UUID", func(t *testing.T) { checkType(t, h, rapid.Make[ehprovider.UUID]()) })
	run("time", func(t *testing.T) { checkType(t, h, timeGen()) })
	run("[]bool", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Bool())) })
	run("[]int8", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Int8())) })
	run("[]int16", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Int16())) })
	run("[]int32", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Int32())) })
	run("[]int64", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Int64())) })
	run("[]int", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Int())) })
	run("[]uint16", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Uint16())) })
	run("[]uint32", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Uint32())) })
	run("[]uint64", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Uint64())) })
	run("[]uint", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Uint())) })
	run("[]uintptr", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Uintptr())) })
	run("[]float32", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Float32())) })
	run("[]float64", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.Float64())) })
	run("[]string", func(t *testing.T) { checkType(t, h, rapid.SliceOf(rapid.String())) })
	run("[]Hex32", func(t *testing.T) { checkType(t, h, rapid.Make[[]ehprovider.Hex32]()) })
	run("[]Hex64", func(t *testing.T) { checkType(t, h, rapid.Make[[]ehprovider.Hex64]()) })
	run("[]Errno", func(t *testing.T) { checkType(t, h, rapid.Make[[]ehprovider.Errno]()) })
	run("[]PID", func(t *testing.T) { checkType(t, h, rapid.Make[[]ehprovider.PID]()) })
	run("[]UUID", func(t *testing.T) { checkType(t, h, rapid.Make[[]ehprovider.UUID]()) })
	run("[]time", func(t *testing.T) { checkType(t, h, rapid.SliceOf(timeGen())) })
}

// TestTypedDefine0Activity checks the event without fields, with and
// without activity ids, against the Builder.
func TestTypedDefine0Activity(t *testing.T) {
	h := newHarness(t)
	lv := eventheader.LevelInformation
	tp := h.p.Tracepoint(lv, 1)
	rapid.Check(t, func(rt *rapid.T) {
		op := eventheader.Opcode(rapid.IntRange(0, 2).Draw(rt, "opcode"))
		ev := ehprovider.Define0(h.p, "Step", lv, 1, ehprovider.WithOpcode(op))
		id := rapid.Make[[16]byte]().Draw(rt, "id")
		rel := rapid.Make[[16]byte]().Draw(rt, "related")
		for k, w := range []func() error{ev.Write, func() error { return ev.WriteActivity(&id, nil) },
			func() error { return ev.WriteActivity(&id, &rel) }, func() error { return ev.WriteActivity(nil, &rel) }} {
			if err := w(); err != nil {
				rt.Fatal(err)
			}
			got := h.read(rt)
			var b eventheader.Builder
			b.Reset("Step", eventheader.Header{Level: lv, Opcode: op})
			switch k {
			case 1:
				b.SetActivityID(&id, nil)
			case 2:
				b.SetActivityID(&id, &rel)
			}
			built, _ := b.AppendEvent(nil)
			if !bytes.HasPrefix(got, built) || len(got)-len(built) >= 8 {
				rt.Fatalf("write %d: typed\n% x\nbuilder\n% x", k, got, built)
			}
			if _, err := eventheader.Decode(tp.Name(), built); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

// TestWithStructErrors: structs outside the fields or overlapping make
// the event unwritable, saying why.
func TestWithStructErrors(t *testing.T) {
	h := newHarness(t)
	lv := eventheader.LevelInformation
	for _, c := range []struct {
		opts []ehprovider.EventOption
		want string
	}{
		{[]ehprovider.EventOption{ehprovider.WithStruct("s", 2, 2)}, `struct "s" of fields 2..3: the event has fields 0..2`},
		{[]ehprovider.EventOption{ehprovider.WithStruct("s", 0, 0)}, `struct "s" of fields 0..-1`},
		{[]ehprovider.EventOption{ehprovider.WithStruct("s", -1, 1)}, `struct "s" of fields -1..-1`},
		{[]ehprovider.EventOption{ehprovider.WithStruct("s", 0, 2), ehprovider.WithStruct("t", 1, 2)},
			`struct "t" of fields 1..2 overlaps struct "s" of fields 0..1`},
		{[]ehprovider.EventOption{ehprovider.WithStruct("s\x00", 0, 2)}, `holds a NUL`},
	} {
		ev := ehprovider.Define3[int, int, int](h.p, "E", lv, 1, "a", "b", "c", c.opts...)
		err := ev.Err()
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("%v: want %q", err, c.want)
		}
		if werr := ev.Write(1, 2, 3); werr == nil || werr.Error() != err.Error() {
			t.Errorf("write: %v, want %v", werr, err)
		}
	}
	// Nesting and apart are fine.
	ev := ehprovider.Define3[int, int, int](h.p, "E", lv, 1, "a", "b", "c",
		ehprovider.WithStruct("in", 1, 2), ehprovider.WithStruct("out", 0, 3), ehprovider.WithStruct("one", 0, 1))
	if err := ev.Err(); err != nil {
		t.Error(err)
	}
}
