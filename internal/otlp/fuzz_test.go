package otlp

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendResponse(nil, PartialSuccess{RejectedLogRecords: 3, ErrorMessage: "x"}))
	f.Add([]byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ParseResponse(b)
		if err != nil {
			return
		}
		// What was read encodes and reads back the same.
		again, err := ParseResponse(AppendResponse(nil, ps))
		if err != nil || again != ps {
			t.Fatalf("%+v read back as %+v, %v", ps, again, err)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendStatus(nil, Status{Code: 8, Message: "m", RetryDelay: 2500 * time.Millisecond}))
	f.Add(AppendStatus(nil, Status{Code: 14}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStatus(b)
		if err != nil {
			return
		}
		if st.RetryDelay < 0 || st.RetryDelay > 86401*time.Second {
			t.Fatalf("retry delay %v out of bounds", st.RetryDelay)
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	f.Add(AppendRequest(nil, sampleRequest()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rls, err := ParseRequest(b)
		if err != nil {
			return
		}
		again, err := ParseRequest(AppendRequest(nil, rls))
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		// Unknown fields are dropped, and an empty ResourceLogs gains
		// an empty scope: compare what both carry.
		if diff := cmp.Diff(rls, again, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
			t.Fatalf("re-encoded request differs (-first +second):\n%s", diff)
		}
	})
}

func FuzzParseGRPCFrame(f *testing.F) {
	f.Add(AppendGRPCFrame(nil, []byte("abc")))
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseGRPCFrame(b)
		if err != nil || len(b) == 0 {
			return
		}
		if string(AppendGRPCFrame(nil, m)) != string(b) {
			t.Fatalf("frame %x read as %x", b, m)
		}
	})
}
