package export

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/perfdata"
)

// TestMetricsRequestLayouts reads the request out of the three layouts
// OpenTelemetry's metrics exporters write: Rust's (and ehotel's) fields,
// C++'s command with other fields but the same bytes, and a record of an
// event without fields (an i32 size, then the request); and refuses a
// protocol other than protobuf, and sizes past the record.
func TestMetricsRequestLayouts(t *testing.T) {
	req := []byte{0x0a, 0x02, 0x0a, 0x00} // resource_metrics {resource {}}
	head := make([]byte, 8)               // the common fields
	layout := func(protocol uint32, size int) []byte {
		p := binary.NativeEndian.AppendUint32(bytes.Clone(head), protocol)
		p = append(p, "v0.19.00"...)
		p = binary.NativeEndian.AppendUint32(p, uint32(size)<<16)
		return append(p, req...)
	}
	event := func(cmd string) *perfdata.Event {
		t.Helper()
		def, err := eventdef.Parse(cmd)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := perfdata.NewEvent("user_events", def.Name, []byte(def.Format(def.Name, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	rust := event("otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer")
	cpp := event("otlp_metrics u32 protocol;char[8] version;u8 rel_loc_byte;u8 buffer")
	bare := event("otlp_metrics")
	other := event("not_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer")
	sized := binary.NativeEndian.AppendUint32(bytes.Clone(head), uint32(len(req)))
	for _, c := range []struct {
		name string
		ev   *perfdata.Event
		raw  []byte
		ok   bool
	}{
		{"rust", rust, layout(0, len(req)), true},
		{"rust, protocol 1", rust, layout(1, len(req)), false},
		{"rust, size past the record", rust, layout(0, len(req)+1), false},
		{"c++", cpp, layout(0, len(req)), true},
		{"no fields, i32 size", bare, append(sized, req...), true},
		{"no fields, size past the record", bare, sized, false},
		{"another event", other, layout(0, len(req)), false},
	} {
		got, ok := metricsRequest(c.ev, c.raw)
		if ok != c.ok || (ok && !bytes.Equal(got, req)) {
			t.Errorf("%s: % x, %v; want ok %v", c.name, got, ok, c.ok)
		}
	}
}
