package preload

import _ "embed"

// Library is libuetrace-preload.so, built from this package's C source by
// go generate (see build): nil on architectures it is not built for.
//
//go:embed libuetrace-preload_amd64.so
var Library []byte
