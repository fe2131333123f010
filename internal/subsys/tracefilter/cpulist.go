package tracefilter

import "golang.org/x/sys/unix"

// parseCPUList is cpulist_parse (lib/bitmap-str.c's bitmap_parselist with
// nr_cpu_ids bits): comma- or space-separated regions "N", "A-B",
// "A-B:used/group", "all", with "N" standing for the last CPU. A CPU at or
// past nbits is ERANGE. The mask has nbits bits, 64 to a word.
func parseCPUList(s string, nbits int) ([]uint64, unix.Errno) {
	mask := make([]uint64, (nbits+63)/64)
	endOfStr := func(i int) bool { c := at(s, i); return c == 0 || c == '\n' }
	endOfRegion0 := func(i int) bool { c := at(s, i); return isSpace(c) || c == ',' }
	endOfRegion := func(i int) bool { return endOfRegion0(i) || endOfStr(i) }
	lastbit := uint64(nbits - 1)
	getnum := func(i int) (uint64, int, unix.Errno) {
		if at(s, i) == 'N' {
			return lastbit, i + 1, 0
		}
		var n uint64
		j := i
		overflow := false
		for ; j < len(s) && isDigit(s[j]); j++ {
			v := uint64(s[j] - '0')
			if n&(0xF000000000000000) != 0 && n > (^uint64(0)-v)/10 {
				overflow = true
			}
			n = n*10 + v
		}
		if j == i {
			return 0, 0, unix.EINVAL
		}
		if overflow || n != uint64(uint32(n)) {
			return 0, 0, unix.EOVERFLOW
		}
		return n, j, 0
	}
	i := 0
	for {
		for endOfRegion0(i) {
			i++
		}
		if endOfStr(i) {
			return mask, 0
		}
		var start, end, off, group uint64
		var errno unix.Errno
		pattern := false
		if len(s)-i >= 3 && (s[i]|0x20) == 'a' && (s[i+1]|0x20) == 'l' && (s[i+2]|0x20) == 'l' {
			start, end = 0, lastbit
			i += 3
			goto checkPattern
		}
		if start, i, errno = getnum(i); errno != 0 {
			return nil, errno
		}
		if endOfRegion(i) {
			end = start
			goto noPattern
		}
		if at(s, i) != '-' {
			return nil, unix.EINVAL
		}
		if end, i, errno = getnum(i + 1); errno != 0 {
			return nil, errno
		}
	checkPattern:
		if endOfRegion(i) {
			goto noPattern
		}
		if at(s, i) != ':' {
			return nil, unix.EINVAL
		}
		if off, i, errno = getnum(i + 1); errno != 0 {
			return nil, errno
		}
		if at(s, i) != '/' {
			return nil, unix.EINVAL
		}
		if group, i, errno = getnum(i + 1); errno != 0 {
			return nil, errno
		}
		pattern = true
		goto check
	noPattern:
		off = end + 1
		group = end + 1
	check:
		if start > end || group == 0 || off > group {
			return nil, unix.EINVAL
		}
		if end >= uint64(nbits) {
			return nil, unix.ERANGE
		}
		for st := start; st <= end; st += group {
			n := min(end-st+1, off)
			for b := st; b < st+n; b++ {
				mask[b/64] |= 1 << (b % 64)
			}
		}
		// A region without a pattern that ends the string ends the list
		// (bitmap_parse_region returns NULL), even at a '\n' with text
		// after it.
		if !pattern && endOfStr(i) {
			return mask, 0
		}
	}
}

func maskWeight(m []uint64) (w int, first int) {
	first = -1
	for i, x := range m {
		for b := 0; b < 64; b++ {
			if x&(1<<b) != 0 {
				if first < 0 {
					first = i*64 + b
				}
				w++
			}
		}
	}
	return w, first
}

func maskTest(m []uint64, cpu uint64) bool {
	if cpu/64 >= uint64(len(m)) {
		return false
	}
	return m[cpu/64]&(1<<(cpu%64)) != 0
}
