package export

import (
	"os"
	"strings"

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

// A Mapper turns samples into OTLP requests, one per signal: the one
// mapping that uetrace export's Exporter and the Collector's userevents
// receiver share. Add maps a sample and keeps it; Request encodes what
// was added of a signal as an Export*ServiceRequest; Reset starts again.
// A Mapper is for one goroutine at a time.
type Mapper struct {
	enc   otlp.Builder
	host  string
	opts  MapperOptions
	batch batch
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
	return &Mapper{host: host, opts: o}, nil
}

// Add maps a sample, observed at observed (ns since 1970), and returns
// the signal it became. s.Raw need not outlive the call.
func (m *Mapper) Add(s *perfdata.Sample, observed uint64) otlp.Signal {
	m.enc.Reset()
	sig, cs, metrics := encodeSample(&m.enc, s, observed)
	m.batch.add(sig, m.enc.Bytes(), metrics, s, cs, m.host, m.opts.ServiceName, m.opts.Scope)
	return sig
}

// Len is how many samples were added since the last Reset.
func (m *Mapper) Len() int { return m.batch.n }

// Count is how many samples of a signal were added since the last Reset.
func (m *Mapper) Count(sig otlp.Signal) int { return m.batch.count[sig] }

// AppendRequest appends the request of a signal's samples to buf: an
// ExportLogsServiceRequest, ExportTraceServiceRequest or
// ExportMetricsServiceRequest.
func (m *Mapper) AppendRequest(buf []byte, sig otlp.Signal) []byte {
	return m.batch.appendRequest(buf, sig)
}

// MetricsRequests calls f with each otlp_metrics record's request, as
// written, in the order they were added: what AppendRequest(Metrics)
// joins. They are what programs wrote: a reader that does not trust them
// parses each alone (joined, one that ends short takes the next one's
// bytes as its own).
func (m *Mapper) MetricsRequests(f func(req []byte)) {
	start := 0
	for _, end := range m.batch.metricEnds {
		f(m.batch.metrics[start:end])
		start = end
	}
}

// Reset forgets what was added, keeping the memory for the next samples.
func (m *Mapper) Reset() { m.batch.reset() }

// add keeps a sample encoded as signal sig: rec, a log record or span;
// metrics, an otlp_metrics record's request.
func (b *batch) add(sig otlp.Signal, rec, metrics []byte, s *perfdata.Sample, cs csResource, host, service string, scope otlp.Scope) {
	if sig == otlp.Metrics {
		b.metrics = append(b.metrics, metrics...)
		b.metricEnds = append(b.metricEnds, len(b.metrics))
	} else {
		if b.byRes[sig] == nil {
			b.byRes[sig] = make(map[resourceKey]int)
		}
		key := resourceKey{s.PID, cs}
		i, ok := b.byRes[sig][key]
		if !ok {
			// cs views the sample's record, which does not outlive Add:
			// what the batch keeps is copied.
			cs = csResource{role: strings.Clone(cs.role), instance: strings.Clone(cs.instance)}
			key.cs = cs
			i = len(b.res[sig])
			b.byRes[sig][key] = i
			if i < cap(b.res[sig]) {
				// A resource of an earlier batch: its memory is reused.
				b.res[sig] = b.res[sig][:i+1]
				r := &b.res[sig][i]
				r.Resource = appendResource(r.Resource[:0], s, cs, host, service)
				r.Scope = scope
				r.Records = r.Records[:0]
			} else {
				b.res[sig] = append(b.res[sig], otlp.EncodedResourceLogs{Resource: appendResource(nil, s, cs, host, service), Scope: scope})
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
	b.metricEnds = b.metricEnds[:0]
	b.count = [3]int{}
	b.n = 0
}

// appendResource appends a sample's resource to kv: the host and the
// process — named by its main thread, else by the sample's thread — and
// the service — the one a Common Schema record names (its ext_cloud_role
// and ext_cloud_roleInstance, the SDK's service.name and
// service.instance.id), else service.
func appendResource(kv []otlp.KeyValue, s *perfdata.Sample, cs csResource, host, service string) []otlp.KeyValue {
	kv = append(kv,
		otlp.KeyValue{Key: "host.name", Value: otlp.StringValue(host)},
		otlp.KeyValue{Key: "process.pid", Value: otlp.IntValue(int64(s.PID))},
	)
	comm := s.ProcessComm
	if comm == "" {
		comm = s.Comm
	}
	if comm != "" {
		kv = append(kv, otlp.KeyValue{Key: "process.executable.name", Value: otlp.StringValue(comm)})
	}
	switch {
	case cs.role != "":
		kv = append(kv, otlp.KeyValue{Key: "service.name", Value: otlp.StringValue(cs.role)})
	case service != "":
		kv = append(kv, otlp.KeyValue{Key: "service.name", Value: otlp.StringValue(service)})
	}
	if cs.instance != "" {
		kv = append(kv, otlp.KeyValue{Key: "service.instance.id", Value: otlp.StringValue(cs.instance)})
	}
	return kv
}
