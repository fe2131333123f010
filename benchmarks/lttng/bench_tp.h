/*
 * The LTTng-UST tracepoint provider of the comparison: two events with the
 * payload of uetrace's DaemonRingWrite benchmark ("bench_write u32 a; u64 b;
 * u32 c; char[16] d; u16 e", 34 bytes of fields).
 *
 *   bench_write:  the same five fields, d a fixed 16-byte text array (CTF
 *                 array of char with text encoding), so LTTng copies 34 bytes
 *                 as uetrace does;
 *   bench_string: d a NUL-terminated string (lttng_ust_field_string) of 15
 *                 characters, 16 bytes with its NUL: the "u32, u64 and a
 *                 string" tracepoint the issue cites; the string costs a
 *                 strlen at write time.
 *
 * Written with LTTng-UST 2.13's names (LTTNG_UST_TRACEPOINT_EVENT,
 * lttng_ust_field_*); 2.12 and older spelled them TRACEPOINT_EVENT, ctf_*.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER uetrace_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./bench_tp.h"

#if !defined(UETRACE_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define UETRACE_BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
	uetrace_bench,
	bench_write,
	LTTNG_UST_TP_ARGS(uint32_t, a, uint64_t, b, uint32_t, c, const char *, d, uint16_t, e),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint32_t, a, a)
		lttng_ust_field_integer(uint64_t, b, b)
		lttng_ust_field_integer(uint32_t, c, c)
		lttng_ust_field_array_text(char, d, d, 16)
		lttng_ust_field_integer(uint16_t, e, e)
	)
)

LTTNG_UST_TRACEPOINT_EVENT(
	uetrace_bench,
	bench_string,
	LTTNG_UST_TP_ARGS(uint32_t, a, uint64_t, b, uint32_t, c, const char *, d, uint16_t, e),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint32_t, a, a)
		lttng_ust_field_integer(uint64_t, b, b)
		lttng_ust_field_integer(uint32_t, c, c)
		lttng_ust_field_string(d, d)
		lttng_ust_field_integer(uint16_t, e, e)
	)
)

#endif /* UETRACE_BENCH_TP_H */

#include <lttng/tracepoint-event.h>
