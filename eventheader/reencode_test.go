package eventheader

import (
	"bytes"
	"testing"
)

// reencode feeds a decoded event — name, header, activity ids, and each
// field's definition and value — to a Builder and returns what it writes.
func reencode(b *Builder, e *Event, dst []byte) ([]byte, error) {
	b.Reset(string(e.Name), e.Header)
	if e.ActivityID != nil {
		var id, rel [16]byte
		copy(id[:], e.ActivityID)
		if e.RelatedActivityID != nil {
			copy(rel[:], e.RelatedActivityID)
			b.SetActivityID(&id, &rel)
		} else {
			b.SetActivityID(&id, nil)
		}
	}
	// writeMeta[d]: whether items at depth d still need their definitions
	// (not for an array's elements, nor for a struct array's elements after
	// the first).
	var writeMeta [MaxDepth + 2]bool
	writeMeta[0] = true
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		d := it.Depth
		wm := writeMeta[d]
		name := string(it.Name)
		switch it.Kind {
		case ItemArrayBegin:
			count := it.ArrayCount
			if it.ArrayFlags == EncodingVArray {
				count = 0
			}
			if it.Encoding == EncodingStruct {
				if wm {
					b.StructArrayField(name, int(it.Format), it.Tag, count)
					if it.ArrayCount == 0 {
						// No element shows the struct's fields.
						b.AppendMetadata(it.ElementMetadata)
					}
				}
			} else if wm {
				b.ArrayField(name, it.Encoding, it.Format, it.Tag, count)
			}
			if it.ArrayFlags == EncodingVArray {
				b.AppendCount(it.ArrayCount)
			}
			writeMeta[d+1] = false
		case ItemStructBegin:
			if it.ArrayFlags == 0 {
				if wm {
					b.StructField(name, int(it.Format), it.Tag)
				}
				writeMeta[d+1] = wm
			} else {
				writeMeta[d+1] = writeMeta[d-1] && it.ArrayIndex == 0
			}
		case ItemValue:
			if wm && it.ArrayFlags == 0 {
				b.Field(name, it.Encoding, it.Format, it.Tag)
			}
			switch {
			case it.Encoding.FixedSize() != 0:
				b.AppendRaw(it.Value)
			case it.Encoding >= EncodingZStringChar8 && it.Encoding <= EncodingZStringChar32:
				b.AppendZString(it.Encoding, it.Value)
			default:
				b.AppendCounted(it.Encoding, it.Value)
			}
		}
	}
	if err := f.Err(); err != nil {
		return dst, err
	}
	return b.AppendEvent(dst)
}

func TestGoldenReencode(t *testing.T) {
	recs := readGolden(t)
	var b Builder
	equal := 0
	for i, r := range recs {
		ev, err := Decode(r.tracepoint, r.data)
		if err != nil {
			t.Errorf("record %d %s: %v", i, r.tracepoint, err)
			continue
		}
		got, err := reencode(&b, &ev, nil)
		if err != nil {
			t.Errorf("record %d %s: %v", i, r.tracepoint, err)
			continue
		}
		if !bytes.Equal(got, r.data) {
			t.Errorf("record %d %s %s:\n got % x\nwant % x", i, r.tracepoint, ev.Name, got, r.data)
			continue
		}
		equal++
	}
	t.Logf("re-encoded byte for byte: %d of %d", equal, len(recs))
}
