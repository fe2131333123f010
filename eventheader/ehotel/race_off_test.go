//go:build !race

package ehotel_test

const raceEnabled = false
