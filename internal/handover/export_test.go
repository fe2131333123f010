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

const (
	IdxPlain = idxPlain
	IdxLoc   = idxLoc
	IdxOff   = idxOff
)
