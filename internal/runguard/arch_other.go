//go:build !amd64 && !arm64

package runguard

// No filter: Install says so and uetrace run goes on unguarded.
var arches []arch
