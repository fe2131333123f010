package client

import (
	"encoding/binary"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// FuzzReplies feeds arbitrary replies to the parsers of this package.
func FuzzReplies(f *testing.F) {
	f.Add(wire.AppendResult(nil, 12, nil))
	f.Add(wire.LE.AppendUint32(wire.LE.AppendUint32(nil, 0o40755), 'a'))
	f.Add(make([]byte, 16+wire.RecordHeaderLen+8))
	f.Fuzz(func(t *testing.T, b []byte) {
		wire.ParseResult(b)
		parseDirEntries(b, nil)
		parseRecords(b, nil)
	})
}

// recvRetry is recv(2) that goes on after a signal: Go preempts goroutines
// with SIGURG, and a socket with a receive timeout is not restarted.

// FuzzSessionRingRecord feeds arbitrary records to the reader's decoder:
// it never panics, and what it accepts lies within the record.
func FuzzSessionRingRecord(f *testing.F) {
	ne := binary.NativeEndian
	sample := ne.AppendUint32(ne.AppendUint32(nil, 7), 1024)
	sample = append(sample, make([]byte, 12)...)
	f.Add(wire.RingSample, sample)
	f.Add(wire.RingComm, append(ne.AppendUint32(ne.AppendUint32(nil, 7), 0), "worker"...))
	f.Add(wire.RingLost, ne.AppendUint32(ne.AppendUint32(ne.AppendUint64(nil, 5), 1024), wire.RingLostTooLarge))
	f.Add(uint32(9), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, kind uint32, payload []byte) {
		rec, err := decodeRingRecord(shmring.Record{Meta: shmring.Meta{Time: 1, WriteIndex: kind, TID: 2, CPU: 3}, Payload: payload})
		if err != nil {
			return
		}
		if rec.Kind != kind || rec.TS != 1 || rec.CPU != 3 {
			t.Fatalf("decoded %+v from kind %d", rec, kind)
		}
		switch kind {
		case wire.RingSample, wire.RingComm:
			if len(rec.Raw) != len(payload)-8 || (kind == wire.RingSample && len(rec.Raw) < 8) {
				t.Fatalf("raw of %d bytes from %d", len(rec.Raw), len(payload))
			}
		case wire.RingLost:
			if len(payload) != 16 || rec.Lost != ne.Uint64(payload) {
				t.Fatalf("lost %d from % x", rec.Lost, payload)
			}
		default:
			t.Fatalf("kind %d accepted", kind)
		}
	})
}
