// Package ibv is ferry's thin binding to libibverbs: the only package that
// imports "C" for verbs. It mirrors the C API closely and adds no policy;
// package verbs decides sizes, ports, GIDs and the connection protocol.
//
// Two kinds of code live here. The types in attr.go (queue-pair attributes,
// enums, the wr_id layout) are plain Go and build everywhere, so the
// attribute builders and state machines above can be unit-tested on machines
// without RDMA. Everything that touches a device is in cgo files and needs
// libibverbs at build time; with CGO_ENABLED=0 those calls return an error
// wrapping ErrNoCgo.
//
// A [Dom] bundles what one NIC endpoint owns in C memory (device context,
// protection and thread domains, one completion queue, two shared receive
// queues, a UD queue pair with its buffers, and the tables that map wr_id
// slots back to operation contexts). It is not safe for concurrent use: its
// owner is a single worker goroutine.
package ibv
