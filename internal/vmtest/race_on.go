//go:build race

package vmtest

// raceEnabled: under -race the VM tests skip. What they boot are static
// binaries built without the race detector, so a -race run would only
// repeat them.
const raceEnabled = true

// RaceEnabled reports whether this binary has the race detector.
const RaceEnabled = raceEnabled
