package tracefilter

import "golang.org/x/sys/unix"

// kstrtoull is lib/kstrtox.c's kstrtoull with base 0: an optional '+',
// then "0x"/"0X" and hex digits (only if a hex digit follows the x), a
// leading 0 and octal digits, or decimal; one trailing '\n' is allowed.
// It returns ERANGE on overflow and EINVAL for anything else that is not
// a number.
func kstrtoull(s string) (uint64, unix.Errno) {
	if at(s, 0) == '+' {
		s = s[1:]
	}
	return kstrtoullNoSign(s)
}

func kstrtoullNoSign(s string) (uint64, unix.Errno) {
	base := uint64(10)
	if at(s, 0) == '0' {
		if at(s, 1)|0x20 == 'x' && isXDigit(at(s, 2)) {
			base = 16
		} else {
			base = 8
		}
	}
	if base == 16 && at(s, 0) == '0' && at(s, 1)|0x20 == 'x' {
		s = s[2:]
	}
	var res uint64
	overflow := false
	n := 0
	for ; n < len(s); n++ {
		c := s[n]
		var v uint64
		switch lc := c | 0x20; {
		case '0' <= c && c <= '9':
			v = uint64(c - '0')
		case 'a' <= lc && lc <= 'f':
			v = uint64(lc-'a') + 10
		default:
			goto done
		}
		if v >= base {
			break
		}
		if res&(0xF000000000000000) != 0 && res > (^uint64(0)-v)/base {
			overflow = true
		}
		res = res*base + v
	}
done:
	if overflow {
		return 0, unix.ERANGE
	}
	if n == 0 {
		return 0, unix.EINVAL
	}
	s = s[n:]
	if at(s, 0) == '\n' {
		s = s[1:]
	}
	if len(s) != 0 {
		return 0, unix.EINVAL
	}
	return res, 0
}

// kstrtoll is kstrtoll with base 0: kstrtoull's syntax with an optional
// '-', and ERANGE outside the range of int64.
func kstrtoll(s string) (int64, unix.Errno) {
	if at(s, 0) == '-' {
		tmp, errno := kstrtoullNoSign(s[1:])
		if errno != 0 {
			return 0, errno
		}
		if int64(-tmp) > 0 {
			return 0, unix.ERANGE
		}
		return int64(-tmp), 0
	}
	tmp, errno := kstrtoull(s)
	if errno != 0 {
		return 0, errno
	}
	if int64(tmp) < 0 {
		return 0, unix.ERANGE
	}
	return int64(tmp), 0
}
