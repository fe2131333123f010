// Package eventheadertest holds Microsoft's EventHeader interop vectors —
// the reference's own encoder output and its decoder's JSON for each event,
// copied into testdata with their licence (testdata/README.md says from
// where) — for the tests of package eventheader and of the packages that
// decode its events. It is for tests; nothing ships with it.
package eventheadertest

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
)

// Count is how many events the reference wrote.
const Count = 374

// Record is one event of the vectors.
type Record struct {
	Tracepoint string // e.g. "TestProviderC_L5K1Gmsft"
	Data       []byte // as written to user_events_data, without the write index
	JSON       []byte // the reference decoder's line for it, without indentation or separator
}

// The vectors, embedded so that the tests need nothing beside the
// repository.
var (
	//go:embed testdata/EventHeaderInterceptorLE64.dat
	vectorData []byte
	//go:embed testdata/EventHeaderInterceptorLE64.dat.linux.json
	vectorJSON []byte
)

// Read parses the vectors: every record with the JSON line the reference
// decoder printed for it, in fresh slices the caller may keep. A malformed
// vector is an error saying where.
func Read() ([]Record, error) {
	dat := bytes.Clone(vectorData)
	js := bytes.Clone(vectorJSON)
	var recs []Record
	for len(dat) > 0 {
		if len(dat) < 4 {
			return nil, fmt.Errorf("interop vectors: trailing %d bytes", len(dat))
		}
		size := int(binary.LittleEndian.Uint32(dat))
		if size < 5 || size > len(dat) {
			return nil, fmt.Errorf("interop vectors: record %d: size %d of %d", len(recs), size, len(dat))
		}
		rec := dat[4:size]
		n := bytes.IndexByte(rec, 0)
		if n < 0 {
			return nil, fmt.Errorf("interop vectors: record %d: no tracepoint name", len(recs))
		}
		recs = append(recs, Record{Tracepoint: string(rec[:n]), Data: rec[n+1:]})
		dat = dat[size:]
	}
	// The JSON holds one event a line: `  { … },` and the last `  { … } ]`.
	js = bytes.TrimPrefix(js, []byte("\xef\xbb\xbf"))
	var lines [][]byte
	for _, l := range bytes.Split(js, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if !bytes.HasPrefix(l, []byte("{ ")) {
			continue
		}
		l = bytes.TrimSuffix(l, []byte(" ]"))
		l = bytes.TrimSuffix(l, []byte(","))
		lines = append(lines, l)
	}
	if len(lines) != len(recs) || len(recs) != Count {
		return nil, fmt.Errorf("interop vectors: %d records, %d JSON lines; the reference wrote %d", len(recs), len(lines), Count)
	}
	for i := range recs {
		recs[i].JSON = lines[i]
	}
	return recs, nil
}
