package handover

// What the tests of package handover_test — those that serve a daemon,
// which imports this package — share with the package's own.
var (
	TestCommands  = testCommands
	TestSampleIDs = testSampleIDs
	SeqPayload    = seqPayload
	LocPayload    = locPayload
	LossPayload   = lossPayload
	ReadStream    = readStream
)

// SetCommitted sets the hook run between a commit and the store of its
// counts (nil: none).
func SetCommitted(f func(k int)) { committed = f }

const (
	IdxPlain = idxPlain
	IdxLoc   = idxLoc
	IdxOff   = idxOff
)
