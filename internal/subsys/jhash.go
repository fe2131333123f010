package subsys

import "math/bits"

// jhash is the kernel's jhash (include/linux/jhash.h, Bob Jenkins' lookup3)
// with initval 0. The registry uses it to pick a bucket, and the bucket
// order is what user_events_status lists, so it must be exact.
func jhash(key string, initval uint32) uint32 {
	const initVal = 0xdeadbeef
	a := initVal + uint32(len(key)) + initval
	b, c := a, a
	k := key
	le32 := func(s string) uint32 {
		return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	}
	for len(k) > 12 {
		a += le32(k)
		b += le32(k[4:])
		c += le32(k[8:])
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		k = k[12:]
	}
	if len(k) == 0 {
		return c
	}
	var tail [12]byte
	copy(tail[:], k)
	t := string(tail[:])
	a += le32(t)
	b += le32(t[4:])
	c += le32(t[8:])
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}

// bucketOf is the register_table bucket of a registered name:
// hash_32(jhash(name, strlen(name), 0), 8) with GOLDEN_RATIO_32.
func bucketOf(name string) int {
	return int((jhash(name, 0) * 0x61C88647) >> 24)
}
