package ringcheck

import (
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// MaxRecord is the longest record a reader of a producer's ring delivers,
// header and padding included: a write's longest (wire.MaxWrite), as over
// the daemon's socket. A longer one is skipped and counted
// (shmring.Stats.TooLong: shmring.Consumer.PeekMax); a producer that checks
// its writes sends such a write over the socket instead, where
// subsys.File.WriteHead answers it as Linux does.
const MaxRecord = shmring.HeaderSize + wire.MaxWrite

// MaxLosses bounds the loss records a reader keeps waiting for the ring's
// next record, whose CPU they are told on: past it, those waiting are told
// on their own CPUs. A producer that writes nothing but loss records costs
// its reader no more memory than that.
const MaxLosses = 64
