package export

import (
	"os"

	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// MapperOptions configure a Mapper.
type MapperOptions struct {
	// ServiceName, when set, is the service.name of every resource that a
	// Common Schema record does not name a service for.
	ServiceName string
	// HostName is the resources' host.name; "": os.Hostname.
	HostName string
	// Scope is the instrumentation scope of the records; "": export's.
	Scope otlp.Scope
}

// A Mapper turns samples into OTLP requests, one per signal: the
// mapping (Encoder) into OTLP protobuf, the records grouped by resource.
// Add maps a sample and keeps it; AppendRequest encodes what was added of
// a signal as an Export*ServiceRequest; Reset starts again. The Exporter
// sends what one maps. A Mapper is for one goroutine at a time.
type Mapper struct {
	w    otlpWriter
	enc  encoder
	host string
	opts MapperOptions
	b    *batch
}

// NewMapper makes a mapper. It fails only when o.HostName is "" and the
// host has no name.
func NewMapper(o MapperOptions) (*Mapper, error) {
	if o.Scope.Name == "" {
		o.Scope = otlp.Scope{Name: "github.com/uetrace/uetrace/internal/export", Version: Version}
	}
	host := o.HostName
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	m := &Mapper{host: host, opts: o, b: &batch{}}
	m.enc.Writer = &m.w
	return m, nil
}

// Add maps a sample, observed at observed (ns since 1970), and returns
// the signal it became. s.Raw need not outlive the call.
func (m *Mapper) Add(s *perfdata.Sample, observed uint64) otlp.Signal {
	m.w.Reset()
	sig, res, metrics := encodeSample(&m.enc, s, observed)
	m.b.add(sig, m.w.Bytes(), metrics, s, res, m.host, m.opts.ServiceName, m.opts.Scope)
	return sig
}

// Len is how many samples were added since the last Reset.
func (m *Mapper) Len() int { return m.b.n }

// Count is how many samples of a signal were added since the last Reset.
func (m *Mapper) Count(sig otlp.Signal) int { return m.b.count[sig] }

// AppendRequest appends the request of a signal's samples to buf: an
// ExportLogsServiceRequest, ExportTraceServiceRequest or
// ExportMetricsServiceRequest.
func (m *Mapper) AppendRequest(buf []byte, sig otlp.Signal) []byte {
	return m.b.appendRequest(buf, sig)
}

// Reset forgets what was added, keeping the memory for the next samples.
func (m *Mapper) Reset() { m.b.reset() }

// take returns what was added, and adds to next from now on: the
// Exporter's batches, sent while the next is filled.
func (m *Mapper) take(next *batch) *batch {
	b := m.b
	m.b = next
	return b
}

// add keeps a sample encoded as signal sig: rec, a log record or span;
// metrics, an otlp_metrics record's request. res is its resource, as
// Encode gave it.
func (b *batch) add(sig otlp.Signal, rec, metrics []byte, s *perfdata.Sample, res Resource, host, service string, scope otlp.Scope) {
	if sig == otlp.Metrics {
		b.metrics = append(b.metrics, metrics...)
	} else {
		if b.byRes[sig] == nil {
			b.byRes[sig] = make(map[Resource]int)
		}
		i, ok := b.byRes[sig][res]
		if !ok {
			// res views the sample's record, which does not outlive Add:
			// what the batch keeps is copied.
			res = res.Clone()
			i = len(b.res[sig])
			b.byRes[sig][res] = i
			if i < cap(b.res[sig]) {
				// A resource of an earlier batch: its memory is reused.
				b.res[sig] = b.res[sig][:i+1]
				r := &b.res[sig][i]
				r.Resource = res.AppendAttributes(r.Resource[:0], ProcessName(s), host, service)
				r.Scope = scope
				r.Records = r.Records[:0]
			} else {
				b.res[sig] = append(b.res[sig], otlp.EncodedResourceLogs{Resource: res.AppendAttributes(nil, ProcessName(s), host, service), Scope: scope})
			}
		}
		b.res[sig][i].Records = append(b.res[sig][i].Records, rec...)
	}
	b.count[sig]++
	b.n++
}

// appendRequest appends the request of one signal's samples to buf.
func (b *batch) appendRequest(buf []byte, sig otlp.Signal) []byte {
	if sig == otlp.Metrics {
		return append(buf, b.metrics...)
	}
	return otlp.AppendEncodedRequest(buf, b.res[sig])
}

// reset empties the batch for reuse.
func (b *batch) reset() {
	for sig := range b.res {
		b.res[sig] = b.res[sig][:0]
		clear(b.byRes[sig])
	}
	b.metrics = b.metrics[:0]
	b.count = [3]int{}
	b.n = 0
}
