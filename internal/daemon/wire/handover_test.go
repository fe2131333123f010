package wire

import (
	"errors"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func sampleHandOver() *HandOver {
	return &HandOver{ID: 7, Rings: 2, PID: 4242, Comm: "producer", LossAge: 1e9, LossClaimed: 3, SessionComm: true,
		Events: []HandOverEvent{{SampleID: 12, Command: "a u32 x"}, {SampleID: 0, Command: "b __data_loc char[] s"}}}
}

func TestHandOverRoundTrip(t *testing.T) {
	h := sampleHandOver()
	b, err := AppendHandOver(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseHandOver(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("got %+v, want %+v", got, h)
	}
	for i := range b {
		if _, err := ParseHandOver(b[:i]); !errors.Is(err, unix.EPROTO) {
			t.Fatalf("cut to %d bytes: %v", i, err)
		}
	}
	if _, err := ParseHandOver(append(b, 0)); !errors.Is(err, unix.EPROTO) {
		t.Errorf("a byte more: %v", err)
	}
}

// TestHandOverTooBig: a table that does not fit a message is refused,
// and nothing is appended.
func TestHandOverTooBig(t *testing.T) {
	h := sampleHandOver()
	for range 200 {
		h.Events = append(h.Events, HandOverEvent{SampleID: 1, Command: string(make([]byte, 500))})
	}
	b, err := AppendHandOver([]byte{1}, h)
	if !errors.Is(err, unix.EMSGSIZE) || len(b) != 1 {
		t.Errorf("%d bytes, %v", len(b), err)
	}
}

func FuzzParseHandOver(f *testing.F) {
	b, _ := AppendHandOver(nil, sampleHandOver())
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHandOver(b)
		if err != nil {
			return
		}
		again, err := AppendHandOver(nil, h)
		if err != nil {
			t.Fatalf("parsed %+v, cannot append it: %v", h, err)
		}
		if string(again) != string(b) {
			t.Fatalf("parsed and appended again: %x, want %x", again, b)
		}
	})
}
