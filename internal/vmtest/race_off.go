//go:build !race

package vmtest

const raceEnabled = false

// RaceEnabled reports whether this binary has the race detector.
const RaceEnabled = raceEnabled
