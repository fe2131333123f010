package subsys

import "encoding/binary"

// WriteStamped is a write that already happened, at time ts by w: the
// reference the tests hold File.Deliver to (the same checks, order, errors
// and consumers), and a way to write with a given time.
func (f *File) WriteStamped(w Writer, ts uint64, idx uint32, payload []byte) (int, error) {
	var ib [4]byte
	binary.NativeEndian.PutUint32(ib[:], idx)
	iov := [2][]byte{ib[:], payload}
	return f.writeIov(w, iov[:], 4+len(payload), ts, true)
}
