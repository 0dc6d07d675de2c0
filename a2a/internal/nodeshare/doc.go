// Package nodeshare is the one implementation of node buffer sharing for
// the a2a backends: the ranks of one NVLink domain that are separate
// processes of a machine hand each other the files behind their send and
// receive buffers, and each maps its peers' (a2a/host maps memfds, a2a/cuda
// imports CUDA VMM handles or the emulator's memfds).
//
// # Protocol
//
// Every member listens on an abstract unix socket of a random name
// (SOCK_SEQPACKET: nothing in the file system, and descriptors in flight
// die with a crashed process). The names travel through the caller's
// exchange. Each member then dials every named peer and sends one offer
// (node-local index, node size, world rank, the sizes asked and exported)
// with its two files attached (internal/shm), while it accepts the peers'
// offers, checks each against its own, maps it and answers "mapped" or
// "refused". An exchange succeeds once this member mapped every named
// peer's buffers and every named peer confirmed it mapped this member's.
// A refusal, a malformed offer or another configuration fails with
// a2a.ErrInvalidArgument; a peer that does not come by the context's
// deadline (a minute without one) fails with a2a.ErrTimeout, naming it.
// On failure nothing this member mapped before changes.
//
// # Rejoin rule
//
// A member keeps its files open for its whole life, so that a restarted
// node peer can map them. To take a restarted peer back, every member
// still running and the newcomer each Offer a fresh socket, publish its
// name through the membership's exchange, and Reshare with the names of
// the current members (nil for ranks that are gone): each maps the named
// peers' current buffers in place of whatever it mapped for them (a dead
// incarnation's), and releases the mappings of every peer not named. A
// first Share is the same exchange with every member named.
package nodeshare
