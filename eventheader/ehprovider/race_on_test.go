//go:build race

package ehprovider_test

// raceEnabled: the race detector makes allocations of its own.
const raceEnabled = true
