//go:build race

package subsys

const raceEnabled = true
