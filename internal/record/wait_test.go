package record_test

import "time"

// waitLimit bounds the tests' waits for what the recorder, a uetrace
// process or the kernel does in its own time (attaching, noticing a new
// event, deleting one). Each wait ends as soon as its condition holds, so
// the limit costs nothing on a quick machine; it is generous because a
// loaded two-core machine, or the kernel VM emulated without KVM, can be
// slower by orders of magnitude, and a test that fails then is broken.
const waitLimit = time.Minute
