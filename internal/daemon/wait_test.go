package daemon

import "time"

// waitLimit bounds the tests' waits for something another goroutine or
// process does (a connection closing, a child registering, a reply). Each
// wait ends as soon as its condition holds, so the limit costs nothing on a
// quick machine; it is generous because a loaded two-core machine can stall
// a goroutine for seconds, and a test that fails then is a broken test.
const waitLimit = time.Minute
