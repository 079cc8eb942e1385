// Package wire is Kafka's wire framing: the int32 size prefix, the request
// and response headers, and the hand-off of message bodies to kmsg.
//
// Both realnet (real TCP) and the simulator's network encode and decode with
// this package, so every message the simulator carries crosses the same
// codec a real client meets (CLARIFICATIONS.md, "Environment interfaces").
//
// The package is pure: it turns bytes into values and back. It must not do
// I/O, start goroutines, keep state between calls, or decide policy: which
// versions a broker advertises, and whether an error closes the connection
// or gets an answer, belong to the caller. RequestError says which case a
// rejected request is, and carries the header so the caller can answer.
//
// # Buffer ownership
//
// ParseRequest and ParseResponse decode with kmsg, whose []byte fields
// (record batches, metadata blobs) alias the frame they were read from.
// Strings are copied. A caller must therefore not reuse or overwrite a frame
// while anything decoded from it is still referenced; handing each frame its
// own buffer is the simple way to obey that.
package wire
