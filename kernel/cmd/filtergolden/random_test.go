package main

import "testing"

func TestRandomFiltersDeterministic(t *testing.T) {
	a, b := randomFilters(1, 50), randomFilters(1, 50)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("filter %d differs: %q, %q", i, a[i], b[i])
		}
	}
	for _, f := range a[:10] {
		t.Log(f)
	}
}
