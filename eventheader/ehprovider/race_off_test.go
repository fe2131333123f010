//go:build !race

package ehprovider_test

const raceEnabled = false
