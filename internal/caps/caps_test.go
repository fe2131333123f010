package caps

import "testing"

func TestPerfmonIn(t *testing.T) {
	for _, c := range []struct {
		status string
		want   bool
	}{
		{"Name:\tx\nCapEff:\t000001ffffffffff\n", true},       // root
		{"CapEff:\t0000004000000000\n", true},                 // CAP_PERFMON alone
		{"CapEff:\t0000000000200000\n", true},                 // CAP_SYS_ADMIN alone
		{"CapEff:\t0000000000000000\n", false},                // nobody
		{"CapEff:\t00000000000000ff\nCapBnd:\tffff\n", false}, // other capabilities
		{"CapPrm:\t000001ffffffffff\n", false},                // no CapEff line
		{"CapEff:\tzz\n", false},
	} {
		if got := perfmonIn(c.status); got != c.want {
			t.Errorf("perfmonIn(%q) = %v, want %v", c.status, got, c.want)
		}
	}
}
