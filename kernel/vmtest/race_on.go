//go:build race

package vmtest

// RaceEnabled reports whether this binary has the race detector. Under
// -race the VM tests skip: what they boot are static binaries built without
// it, so a -race run would only repeat them.
const RaceEnabled = true
