// Package suites runs the product's own test suites inside the real Linux
// 6.12 kernel (booted by package vmtest), where the kernel backend exists:
// package userevents' backend suite, package record's per-target tests,
// eventheader/ehprovider's perf read-back of a provider's events,
// eventheader/ehslog's testing/slogtest read back through perf, and
// package export's live export from the kernel to a real OpenTelemetry
// Collector run in the guest, and cmd/uetrace's program that opens a user
// event's id as perf-collect does (which uetrace run refuses for its tree's
// ids), each compiled as a static test binary, run
// as root in the guest, and required to have passed on the kernel — not
// skipped, not passed on the daemon only.
//
// It holds tests only. Keeping them here, beside the VM runner, keeps the
// product's packages free of any import of the kernel tooling, tests
// included (TestLayout in layout_test.go at the repository root checks it).
package suites
