// Package format is gclock's binary trace format: one file per process,
// written as a sequence of self-checking chunks so that a process that
// crashes leaves a file whose complete chunks are all readable.
//
// A file starts with the 8-byte magic "GCLKTRC1" and continues with chunks.
// Every chunk has a 24-byte header
//
//	magic u32 "CHNK" | kind u8 | flags u8 | reserved u16 | length u32 | count u32 | seq u32 | crc u32
//
// followed by length payload bytes. crc is the CRC-32C (Castagnoli) of the
// first 20 header bytes and the payload, so a torn write, a flipped bit or a
// zeroed page is detected and reported with the file name and byte offset.
// All integers are little endian.
//
// Chunk kinds:
//
//   - KindMeta: who wrote the file (process, host, name, clock, flags).
//   - KindEvents: fixed 32-byte Event records, in local time order.
//   - KindSync: one sync session: the raw estimate.Sample exchanges with the
//     reference (seed 001's SYNC-MAX-MESSAGES exchanges).
//   - KindMappings: local-to-global mappings recorded from the daemon.
//   - KindNames: the string table (region, instant and counter names).
//   - KindMerged: 48-byte Merged records of a merged trace.
//
// Writing: NewWriter, then WriteMeta first and the other Write methods in any
// order; each call writes exactly one chunk (one Write to the underlying
// io.Writer). Reading: NewReader and Next, then the Decode functions on the
// chunk's payload. Next returns a *CorruptError (errors.Is ErrCorrupt or
// ErrTruncated) naming the file and offset; Resync skips to the next chunk
// that checks out, for --keep-going readers.
package format
