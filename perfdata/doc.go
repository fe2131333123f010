// Package perfdata reads and writes perf.data files — the PERFILE2 file
// format of `perf record`, as tools/perf/util/header.c lays it out — and
// reads them as a perf session does (tools/perf/util/session.c): samples in
// time order, each with its event, its task's name and its wall-clock
// time. It is what every uetrace tool that reads or writes perf.data is
// built on: `uetrace record` writes with it, `uetrace report` and
// `uetrace export` read through its Session, and a live recording gives
// its consumers the same Sample.
//
// A file is a 104-byte header, a data section of records (samples, COMM,
// LOST, ...), the perf_event_attr of every event with the sample ids that
// belong to it, and feature sections: the tracing data (tracefs format files,
// which tell `perf script` how to print a tracepoint's raw record), the event
// names, and host facts (hostname, OS release, arch, CPUs, command line).
//
// [Writer] streams records into the data section through a large buffer; the
// attrs, ids and features can be added at any time and are written by
// [Writer.Close], after the data, followed by the header: the layout perf
// 6.12's `perf inject` writes with write_attrs_after_data. Perf (6.1 and
// later) reads it.
//
// [Reader] opens files written by the Writer, by real `perf record` and by
// Microsoft's perf-collect (LinuxTracepoints), and
// iterates the records in file order without allocating, from a mapping of
// the data section (or large ReadAt reads); samples are decoded by the
// sample_type of the attr their id belongs to, and the sample_id_all
// trailer of other kernel records is decoded too. Records perfdata does
// not know are returned as they are.
//
// [Session] reads a Reader's samples as perf script is given them: an
// [Event] of every attr (its name, and its tracefs format parsed by
// package tracefmt, from the tracing data), the names of tasks from COMM
// and FORK records ([Threads]), time order by perf's ordered events
// (flushed at each PERF_RECORD_FINISHED_ROUND, so that a file of many
// rings or a pipe-mode stream is read in order with bounded memory), and
// the records the recording lost. An Event tells whether it is an
// EventHeader tracepoint and decodes its records (package eventheader);
// printing them is the tools' business.
//
// Attrs are read as perf-decode reads them, not as perf does: the header's
// attr_size is the size of each attr's slot, which perf's read_attr
// ignores, stepping by each attr's own size instead. Files perf writes have
// both the same; perf-collect writes 128-byte slots whose attrs say 96,
// which perf 6.1 refuses and the Reader reads.
//
// The Reader reads pipe-mode streams too (`perf record -o -`, saved to a
// file or read whole from a pipe into memory): a 16-byte header, then
// records only — the attrs (PERF_RECORD_HEADER_ATTR), the tracing data
// (HEADER_TRACING_DATA, its bytes right after the record), the features
// (HEADER_FEATURE) and event names (EVENT_UPDATE) come first, before the
// kernel's records, and are read at open, so Attrs, TracingData, Meta and
// FeatureData answer as for a file. Next returns those records too, and
// takes in an attr that comes later (Attrs then grows).
//
// perfdata does not resolve symbols or mappings (MMAP records are returned
// as they are), and does not format tracepoint records; package tracefmt
// knows the tracefs format text. Its limits:
//
//   - The Writer writes only file mode.
//   - Only files in the machine's byte order. Perf can swap a file recorded
//     on a machine of the other endianness; perfdata refuses it.
//   - Compressed records (PERF_RECORD_COMPRESSED, `perf record -z`) and
//     auxtrace data are passed through as raw records, not decoded.
//   - The Writer encodes samples whose sample_type has only IDENTIFIER, IP,
//     TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD and RAW; records with other
//     fields can be written already encoded with [Writer.WriteRecord].
//   - The Writer writes attrs of PERF_ATTR_SIZE_VER7 (128 bytes, the largest
//     that perf 6.1 reads), or VER8 (136) if an attr sets Config3.
//   - A COMM or LOST written before the first attr is refused: the first
//     attr decides the layout of their sample_id trailer.
//   - A Session's samples have their ID, PID, TID, Time, CPU and Raw, not
//     their IP, Addr, StreamID, Period or Misc (which mean nothing for a
//     tracepoint): the Reader gives those.
//
// A Writer, a Reader or a Session is not safe for concurrent use.
package perfdata
