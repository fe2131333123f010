//go:build race

package ehslog_test

// raceEnabled: the race detector makes allocations of its own, and
// sync.Pool drops what it holds at random.
const raceEnabled = true
