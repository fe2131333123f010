package eventheader

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestFieldChecks defines a field of every encoding byte with formats
// with and without the chain bit: the builder refuses exactly the
// encodings that are not value encodings (struct, invalid, past
// EncodingMax, with a flag bit) and the formats with the chain bit,
// encoding first, and writes the definition with the flags dropped.
func TestFieldChecks(t *testing.T) {
	for e := range 256 {
		for _, f := range []Format{FormatDefault, FormatHexInt, FormatHexInt | FormatChain, 0x7f, 0xff} {
			for _, tag := range []uint16{0, 0x1234} {
				enc := Encoding(e)
				var b Builder
				b.Reset("E", Header{})
				b.Field("f", enc, f, tag)
				badEnc := enc&^EncodingValueMask != 0 || enc == EncodingInvalid || enc == EncodingStruct || enc >= EncodingMax
				badFmt := f&^FormatValueMask != 0
				err := b.Err()
				switch {
				case badEnc:
					if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "not a value encoding") {
						t.Errorf("encoding %#x format %#x: %v, want the encoding refused", e, uint8(f), err)
					}
				case badFmt:
					if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "chain bit") {
						t.Errorf("encoding %#x format %#x: %v, want the format refused", e, uint8(f), err)
					}
				case err != nil:
					t.Errorf("encoding %#x format %#x: %v", e, uint8(f), err)
				}
				me, mf := enc&EncodingValueMask, f&FormatValueMask
				want := []byte("E\x00f\x00")
				switch {
				case tag != 0:
					want = append(want, byte(me|EncodingChain), byte(mf|FormatChain), byte(tag), byte(tag>>8))
				case mf != 0:
					want = append(want, byte(me|EncodingChain), byte(mf))
				default:
					want = append(want, byte(me))
				}
				if !bytes.Equal(b.meta, want) {
					t.Errorf("encoding %#x format %#x tag %#x: metadata %x, want %x", e, uint8(f), tag, b.meta, want)
				}
			}
		}
	}
}
