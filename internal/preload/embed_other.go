//go:build !amd64

package preload

// Library is nil: the interposer is built for amd64 only, and programs on
// this architecture write through FUSE.
var Library []byte
