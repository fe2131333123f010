package stamp_test

import (
	"testing"

	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// The daemon's trace clock has the same base: a record stamped by a client
// sorts correctly among the records the subsystem stamps itself.
func TestNowIsTheTraceClock(t *testing.T) {
	for range 1000 {
		a := stamp.Now()
		l := ftrace.LocalClock()
		b := stamp.Now()
		if l < a || l > b {
			t.Fatalf("ftrace.LocalClock() = %d, not between Now() %d and %d", l, a, b)
		}
	}
}
