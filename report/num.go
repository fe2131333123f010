package report

import "math/bits"

// Integer printing for the hot path. strconv.AppendUint formats into a
// buffer of its own and then copies; these write the digits where they
// go, two at a time, and a report prints seven or more integers an event.

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

var pow10 = [...]uint64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// decimalLen is the number of decimal digits of v (1 for 0).
func decimalLen(v uint64) int {
	// log10(2) ≈ 1233/4096: a guess that is right or one too many.
	n := bits.Len64(v) * 1233 >> 12
	if v >= pow10[n] {
		n++
	}
	return max(n, 1)
}

// appendUint appends v in decimal, as strconv.AppendUint(b, v, 10).
func appendUint(b []byte, v uint64) []byte {
	if v < 10 {
		return append(b, byte('0'+v))
	}
	n := decimalLen(v)
	l := len(b)
	if cap(b)-l < n {
		b = append(b, make([]byte, n)...)
	} else {
		b = b[:l+n]
	}
	putDigits(b[l:], v)
	return b
}

// putDigits writes v's decimal digits so that they end at the end of d,
// which must be long enough; leading positions beyond the digits are not
// touched.
func putDigits(d []byte, v uint64) {
	i := len(d)
	for v >= 1e8 && i >= 2 {
		q := v / 100
		r := (v - q*100) * 2
		d[i-1], d[i-2] = digitPairs[r+1], digitPairs[r]
		i -= 2
		v = q
	}
	// The rest fits 32 bits, whose division is cheaper.
	w := uint32(v)
	for w >= 100 && i >= 2 {
		q := w / 100
		r := (w - q*100) * 2
		d[i-1], d[i-2] = digitPairs[r+1], digitPairs[r]
		i -= 2
		w = q
	}
	switch {
	case w >= 10 && i >= 2:
		d[i-1], d[i-2] = digitPairs[w*2+1], digitPairs[w*2]
	case i >= 1:
		d[i-1] = byte('0' + w)
	}
}

// appendInt appends v in decimal, as strconv.AppendInt(b, v, 10).
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(b, '-'), -uint64(v))
	}
	return appendUint(b, uint64(v))
}

// appendZeroPad appends v < 10^width in exactly width digits.
func appendZeroPad(b []byte, v uint64, width int) []byte {
	l := len(b)
	if cap(b)-l < width {
		b = append(b, make([]byte, width)...)
	} else {
		b = b[:l+width]
	}
	d := b[l:]
	for i := range d {
		d[i] = '0'
	}
	putDigits(d, v)
	return b
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
