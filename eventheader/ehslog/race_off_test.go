//go:build !race

package ehslog_test

const raceEnabled = false
