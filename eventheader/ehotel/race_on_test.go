//go:build race

package ehotel_test

// raceEnabled: the race detector makes allocations of its own.
const raceEnabled = true
