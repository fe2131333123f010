package procfs

import (
	"os"
	"slices"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addFixtures seeds a fuzz target with the fixtures named.
func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		f.Add(fixture(f, n))
	}
}

const allStatus = StatusTgid | StatusPPid | StatusUid | StatusGid | StatusCapEff | StatusNSpid | StatusSigPnd | StatusShdPnd | StatusSigBlk | StatusThreads

func TestParseStatus(t *testing.T) {
	root := ParseStatus(fixture(t, "status-root"))
	if root.Found != allStatus || root.Tgid != 4242 || root.PPid != 4240 || root.Uid != [4]uint32{} || root.Gid != [4]uint32{} ||
		root.CapEff != 0x1fffeffffff || !slices.Equal(root.NSpid, []int{4242}) {
		t.Errorf("status-root: %+v", root)
	}
	// A thread (Pid 4301 of process 4300) two pid namespaces down, of a
	// user with no capabilities, whose parent /proc cannot see; SIGUSR1
	// pending for it, SIGTERM for its process, SIGUSR2 blocked; three
	// threads.
	th := ParseStatus(fixture(t, "status-thread-nested"))
	if th.Found != allStatus || th.Tgid != 4300 || th.PPid != 0 || th.Uid != [4]uint32{1000, 1001, 1002, 1003} ||
		th.Gid != [4]uint32{100, 101, 102, 103} || th.CapEff != 0 || !slices.Equal(th.NSpid, []int{4301, 18, 2}) ||
		th.Threads != 3 || th.SigPnd != 1<<(10-1) || th.ShdPnd != 1<<(15-1) || th.SigBlk != 1<<(12-1) {
		t.Errorf("status-thread-nested: %+v", th)
	}
	// Read while its task exits: what was read, no more; a Uid line of
	// two ids is not one.
	short := ParseStatus(fixture(t, "status-short"))
	if short.Found != StatusTgid|StatusPPid || short.Tgid != 4242 || short.PPid != 4240 {
		t.Errorf("status-short: %+v", short)
	}
	for _, c := range []struct {
		in   string
		want Status
	}{
		{"Name:\tx\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n", Status{CapEff: 0x1ffffffffff, Found: StatusUid | StatusCapEff}},
		{"Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\n", Status{Uid: [4]uint32{1, 2, 3, 4}, Gid: [4]uint32{5, 6, 7, 8}, Found: StatusUid | StatusGid}},
		{"Uid:\t1\t2\nGid:\t5\t6\t7\n", Status{}},               // short id lines
		{"Uid:\t1\t2\t3\t4\t5\n", Status{}},                     // a long one
		{"Uid:\tx\nCapEff:\tzz\nTgid:\t\nPPid:\t-\n", Status{}}, // malformed
		{"Uid:\t1\t2\t3\t4294967296\n", Status{}},               // a uid past 32 bits
		{"Name:\tNSpid:\t3\n", Status{}},                        // a name must start its line
		{"NSpid:\n", Status{}},                                  // no ids
		{"Tgid:\t7\nTgid:\tx\n", Status{}},                      // the last of a repeated name counts
		{"Tgid: 7", Status{Tgid: 7, Found: StatusTgid}},         // no newline at the end
		{"NSpid:\t10\t2\t1\nUid:\t0\n", Status{NSpid: []int{10, 2, 1}, Found: StatusNSpid}},
	} {
		got := ParseStatus([]byte(c.in))
		if got.Found != c.want.Found || got.Tgid != c.want.Tgid || got.Uid != c.want.Uid || got.Gid != c.want.Gid ||
			got.CapEff != c.want.CapEff || (got.Found&StatusNSpid != 0 && !slices.Equal(got.NSpid, c.want.NSpid)) {
			t.Errorf("ParseStatus(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestParseStatusNSpid: the NSpid line alone, as pidns reads it.
func TestParseStatusNSpid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"Name:\tx\nNSpid:\t10\t2\t1\nUid:\t0\n", []int{10, 2, 1}, true},
		{"NSpid:\t7\n", []int{7}, true},
		{"Pid:\t-1\nNSpid:\t-1\n", []int{-1}, true},
		{"Name:\tNSpid:\t3\n", nil, false},
		{"NSpid:\tx\n", nil, false},
	} {
		s := ParseStatus([]byte(tc.in))
		if s.Has(StatusNSpid) != tc.ok || !slices.Equal(s.NSpid, tc.want) {
			t.Errorf("ParseStatus(%q): NSpid %v, %v; want %v, %v", tc.in, s.NSpid, s.Has(StatusNSpid), tc.want, tc.ok)
		}
	}
}

func TestReadStatus(t *testing.T) {
	s, err := ReadStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.Found != allStatus || s.Tgid != os.Getpid() || s.PPid != os.Getppid() || s.Uid[0] != uint32(os.Getuid()) || s.Uid[1] != uint32(os.Geteuid()) ||
		s.Gid[0] != uint32(os.Getgid()) || len(s.NSpid) == 0 || s.NSpid[0] != os.Getpid() {
		t.Errorf("ReadStatus(self) = %+v", s)
	}
}

func FuzzParseStatus(f *testing.F) {
	addFixtures(f, "status-root", "status-thread-nested", "status-short", "fdinfo-pidfd", "fdinfo-pidfd-unseen")
	f.Fuzz(func(t *testing.T, b []byte) {
		s := ParseStatus(b)
		if s.Found&^allStatus != 0 {
			t.Fatalf("found lines %#x that Status has not", s.Found)
		}
		if s.Has(StatusNSpid) != (len(s.NSpid) > 0) {
			t.Fatalf("NSpid %v with Found %#x", s.NSpid, s.Found)
		}
		// A field whose line was not found is zero.
		var zero Status
		for _, c := range []struct {
			f    StatusField
			zero bool
		}{
			{StatusTgid, s.Tgid == 0}, {StatusPPid, s.PPid == 0}, {StatusUid, s.Uid == zero.Uid},
			{StatusGid, s.Gid == zero.Gid}, {StatusCapEff, s.CapEff == 0}, {StatusNSpid, s.NSpid == nil},
			{StatusThreads, s.Threads == 0}, {StatusSigPnd, s.SigPnd == 0}, {StatusShdPnd, s.ShdPnd == 0}, {StatusSigBlk, s.SigBlk == 0},
		} {
			if !s.Has(c.f) && !c.zero {
				t.Fatalf("field %#x not found but set: %+v", c.f, s)
			}
		}
	})
}

func TestParsePidfdNSpid(t *testing.T) {
	if got := ParsePidfdNSpid(fixture(t, "fdinfo-pidfd")); !slices.Equal(got, []int{4301, 18, 2}) {
		t.Errorf("fdinfo-pidfd: NSpid %v", got)
	}
	if got := ParsePidfdNSpid(fixture(t, "fdinfo-pidfd-unseen")); !slices.Equal(got, []int{-1}) {
		t.Errorf("fdinfo-pidfd-unseen: NSpid %v", got)
	}
	if got := ParsePidfdNSpid([]byte("Pid:\t7\n")); got != nil {
		t.Errorf("no NSpid line: %v", got)
	}
}
