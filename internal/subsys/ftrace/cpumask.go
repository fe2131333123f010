package ftrace

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
)

// SetCPUMask sets tracing_cpumask: mask[i] false takes CPU i out of
// tracing, and its buffer then takes no record — Write and Reserve refuse
// them without counting them anywhere, as ring_buffer_record_disable_cpu
// makes the kernel's reserve fail (tracing_set_cpumask). Records already
// in the buffer stay, and are read as before. mask has a value for each
// CPU of the Ring.
func (r *Ring) SetCPUMask(mask []bool) {
	for i, c := range r.cpus {
		c.mu.Lock()
		c.disabled.Store(i < len(mask) && !mask[i])
		c.mu.Unlock()
	}
}

// CPUMask returns tracing_cpumask: for each CPU, whether it is traced.
func (r *Ring) CPUMask() []bool {
	mask := make([]bool, len(r.cpus))
	for i, c := range r.cpus {
		c.mu.Lock()
		mask[i] = !c.disabled.Load()
		c.mu.Unlock()
	}
	return mask
}

// Traced reports whether cpu is in tracing_cpumask.
func (r *Ring) Traced(cpu int) bool {
	if uint(cpu) >= uint(len(r.cpus)) {
		return false
	}
	return !r.cpus[cpu].disabled.Load()
}

// AppendCPUMask appends a CPU mask as tracing_cpumask prints it ("%*pb\n",
// bitmap_string): hexadecimal in 32-bit chunks, the most significant
// first, separated by commas, each of 8 digits but the first, which has a
// digit for each 4 of its bits — "3" for 2 CPUs, "01" for CPU 0 of 6,
// "ff,ffffffff" for 40.
func AppendCPUMask(dst []byte, mask []bool) []byte {
	const hex = "0123456789abcdef"
	n := len(mask)
	chunk := n % 32
	if chunk == 0 {
		chunk = 32
	}
	for i := (n+31)/32*32 - 32; i >= 0; i -= 32 {
		if i+chunk < n {
			dst = append(dst, ',')
		}
		var v uint32
		for b := 0; b < chunk && i+b < n; b++ {
			if mask[i+b] {
				v |= 1 << b
			}
		}
		for d := (chunk+3)/4 - 1; d >= 0; d-- {
			dst = append(dst, hex[v>>(4*d)&0xf])
		}
		chunk = 32
	}
	return append(dst, '\n')
}

// ParseCPUMask parses what is written to tracing_cpumask for n CPUs as
// the kernel does (cpumask_parse_user, bitmap_parse): the text ends at
// the first NUL or newline; it is hexadecimal chunks of at most 32 bits,
// separated by commas or white space, the last chunk the lowest CPUs; a
// chunk with a character that is not a hex digit is EINVAL, one of more
// than 8 digits, more chunks than n CPUs need, or a bit set for a CPU
// past n, EOVERFLOW. CPUs no chunk covers are cleared, so an empty text
// clears them all.
func ParseCPUMask(p []byte, n int) ([]bool, error) {
	if i := bytes.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		p = p[:i]
	}
	// The kernel's isspace, and the comma (__end_of_region).
	isSep := func(c byte) bool { return c == ',' || c == ' ' || c >= '\t' && c <= '\r' || c == 0xa0 }
	chunks := (n + 31) / 32
	words := make([]uint32, 0, chunks)
	end := len(p) - 1
	for {
		for end >= 0 && isSep(p[end]) {
			end--
		}
		if end < 0 {
			break
		}
		if len(words) == chunks {
			return nil, fmt.Errorf("tracing_cpumask %q: more than %d CPUs: %w", p, n, unix.EOVERFLOW)
		}
		var v uint32
		for i := 0; ; i += 4 {
			if i == 32 {
				if end >= 0 && hexDigit(p[end]) >= 0 {
					return nil, fmt.Errorf("tracing_cpumask %q: a chunk of more than 32 bits: %w", p, unix.EOVERFLOW)
				}
				break
			}
			d := hexDigit(p[end])
			if d < 0 {
				return nil, fmt.Errorf("tracing_cpumask %q: %q is not a hex digit: %w", p, p[end], unix.EINVAL)
			}
			v |= uint32(d) << i
			end--
			if end < 0 || isSep(p[end]) {
				break
			}
		}
		words = append(words, v)
	}
	mask := make([]bool, n)
	for w, v := range words {
		for b := range 32 {
			if v&(1<<b) == 0 {
				continue
			}
			cpu := w*32 + b
			if cpu >= n {
				return nil, fmt.Errorf("tracing_cpumask %q: CPU %d is past the %d CPUs: %w", p, cpu, n, unix.EOVERFLOW)
			}
			mask[cpu] = true
		}
	}
	return mask, nil
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
