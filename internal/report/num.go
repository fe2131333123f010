package report

// Integer printing for the hot path: strconv.AppendUint is general (any
// base) and slower; a report prints seven or more integers an event.

const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendUint appends v in decimal, as strconv.AppendUint(b, v, 10).
func appendUint(b []byte, v uint64) []byte {
	if v < 100 {
		if v < 10 {
			return append(b, byte('0'+v))
		}
		return append(b, digitPairs[v*2], digitPairs[v*2+1])
	}
	var buf [20]byte
	i := putDigits(&buf, v)
	return append(b, buf[i:]...)
}

// putDigits writes v's decimal digits at the end of buf, two at a time,
// and returns where they start.
func putDigits(buf *[20]byte, v uint64) int {
	i := len(buf)
	for v >= 1e8 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		buf[i+1], buf[i] = digitPairs[r+1], digitPairs[r]
		v = q
	}
	// The rest fits 32 bits, whose division is cheaper.
	w := uint32(v)
	for w >= 100 {
		q := w / 100
		r := (w - q*100) * 2
		i -= 2
		buf[i+1], buf[i] = digitPairs[r+1], digitPairs[r]
		w = q
	}
	if w >= 10 {
		i -= 2
		buf[i+1], buf[i] = digitPairs[w*2+1], digitPairs[w*2]
	} else {
		i--
		buf[i] = byte('0' + w)
	}
	return i
}

// appendInt appends v in decimal, as strconv.AppendInt(b, v, 10).
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(b, '-'), -uint64(v))
	}
	return appendUint(b, uint64(v))
}

// appendZeroPad appends v < 10^width in exactly width ≤ 20 digits.
func appendZeroPad(b []byte, v uint64, width int) []byte {
	if width == 6 { // the microseconds and nanoseconds of a time
		hi := v / 10000
		lo := v - hi*10000
		mid := lo / 100
		lo -= mid * 100
		return append(b, digitPairs[hi*2], digitPairs[hi*2+1], digitPairs[mid*2], digitPairs[mid*2+1],
			digitPairs[lo*2], digitPairs[lo*2+1])
	}
	buf := [20]byte{'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'}
	putDigits(&buf, v)
	return append(b, buf[len(buf)-width:]...)
}

// timeDigits prints increasing nanosecond times fast: consecutive events
// mostly share all but their last six digits, which are printed once per
// millisecond.
type timeDigits struct {
	ms     uint64
	prefix []byte // the digits of ms; empty before the first time
}

// append appends t in decimal.
func (c *timeDigits) append(b []byte, t uint64) []byte {
	if t < 1e6 {
		return appendUint(b, t)
	}
	if ms := t / 1e6; ms != c.ms || len(c.prefix) == 0 {
		c.ms, c.prefix = ms, appendUint(c.prefix[:0], ms)
	}
	return appendZeroPad(append(b, c.prefix...), t%1e6, 6)
}
