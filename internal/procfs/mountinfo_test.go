package procfs

import (
	"os"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	b, err := os.ReadFile("testdata/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	ms := ParseMountinfo(b)
	if len(ms) != 3 {
		t.Fatalf("%d mounts: %+v", len(ms), ms)
	}
	if m := ms[1]; m.MountPoint != "/tmp/a b/mnt" || m.FSType != "fuse.uetrace" || m.Source != "uetrace x" || m.Dev != 39 {
		t.Errorf("%+v", m)
	}
	if m := ms[2]; m.MountPoint != "/sys/kernel/tracing" || m.FSType != "tracefs" {
		t.Errorf("%+v", m)
	}
}

func FuzzMountinfo(f *testing.F) {
	addFixtures(f, "mountinfo")
	f.Add([]byte("42 27 0:39 / /tmp/a\\040b rw shared:5 - fuse.uetrace s rw\n"))
	f.Add([]byte("1 2 3:4 / / rw - ext4 /dev/sda rw\n\\\n- - -"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseMountinfo(b) {
			if m.FSType == "" || m.MountPoint == "" {
				t.Fatalf("an empty field taken: %+v", m)
			}
		}
	})
}
