//go:build !race

package vmtest

// RaceEnabled reports whether this binary has the race detector.
const RaceEnabled = false
