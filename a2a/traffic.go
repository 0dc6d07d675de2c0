package a2a

// Traffic is what the fabric writes of one tag asked the engine to move,
// counted where they are posted (not computed from the plan): Bytes, the
// payload of every write, shards of every NIC together; Rows, the
// transport rows they carried (for TagRoute, one count row per write).
// Rows times the phase's nominal row bytes (token and scales in dispatch,
// CombineBytes in combine) is what the writes had to carry; Bytes above
// it is padding. Copies inside a node domain are not fabric writes and
// are not counted.
type Traffic struct {
	Bytes, Rows uint64
}

// TrafficCounter is implemented by backends that count their fabric
// writes (the host and CUDA backends): Traffic returns the running total
// of tag's writes since the backend was built (TagRoute, TagDispatch and
// TagCombine carry bytes; the other tags are zero-byte signals). Safe to
// call from any goroutine.
type TrafficCounter interface {
	Traffic(t Tag) Traffic
}
