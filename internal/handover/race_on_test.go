//go:build race

package handover

// raceEnabled says the tests run with the race detector, which makes the
// load tests' records cost ten times as much.
const raceEnabled = true
