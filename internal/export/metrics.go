package export

import (
	"encoding/binary"
	"strings"

	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefmt"
)

// MetricsEvent is the event OpenTelemetry's user_events metrics exporters
// write: one OTLP ExportMetricsServiceRequest a record, sent on as it is.
const MetricsEvent = "otlp_metrics"

// metricsRequest returns the ExportMetricsServiceRequest a record of an
// otlp_metrics event holds, as the exporters lay it out:
//
//   - Rust's and ehotel's, "otlp_metrics u32 protocol; char[8] version;
//     __rel_loc u8[] buffer": the buffer field;
//   - C++'s (opentelemetry-cpp-contrib's exporters/user_events), whose
//     command names other fields but which writes the same bytes — protocol,
//     version, a __rel_loc word of the buffer's size, the buffer — and an
//     older form without fields: an i32 size, then the request.
//
// ok is false when the record holds none of these (a protocol other than
// 0, protobuf, too).
func metricsRequest(ev *perfdata.Event, raw []byte) ([]byte, bool) {
	if ev.Format == nil || (ev.Name != MetricsEvent && !strings.HasPrefix(ev.Name, MetricsEvent+".")) {
		return nil, false
	}
	f := ev.Format
	if fd := f.Field("buffer"); fd != nil && fd.Kind != tracefmt.Int {
		if p := f.Field("protocol"); p != nil {
			if v := p.Value(raw); v.Overflow || v.Uint() != 0 {
				return nil, false
			}
		}
		v := fd.Value(raw)
		if v.Overflow {
			return nil, false
		}
		return v.Data, true
	}
	// The bytes after the common fields.
	start := 0
	for i := range f.Common {
		start = max(start, f.Common[i].Offset+f.Common[i].Size)
	}
	if start > len(raw) {
		return nil, false
	}
	p := raw[start:]
	if len(p) >= 16 && binary.NativeEndian.Uint32(p) == 0 {
		loc := binary.NativeEndian.Uint32(p[12:])
		if size := int(loc >> 16); loc&0xffff == 0 && 16+size <= len(p) {
			return p[16 : 16+size], true
		}
	}
	if len(p) >= 4 {
		if size := int(int32(binary.NativeEndian.Uint32(p))); size >= 0 && 4+size <= len(p) {
			return p[4 : 4+size], true
		}
	}
	return nil, false
}
