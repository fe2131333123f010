package client

import (
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/wire"
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
