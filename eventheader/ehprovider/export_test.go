package ehprovider

// SetHostLE makes the typed path take the little-endian (true) or the
// other (false) way of appending arrays; the returned func restores it.
func SetHostLE(v bool) (restore func()) {
	old := hostLE
	hostLE = v
	return func() { hostLE = old }
}
