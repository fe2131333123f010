package subsys

import "testing"

func TestBucketOf(t *testing.T) {
	// Spec §6.1, checked on the reference kernel.
	for name, want := range map[string]int{"test": 228, "__test_event": 35, "__abi_event": 237} {
		if got := bucketOf(name); got != want {
			t.Errorf("bucketOf(%q) = %d, want %d", name, got, want)
		}
	}
}
