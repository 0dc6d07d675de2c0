// Package directory is where engines that come and go find each other: an
// engine publishes its entry (name, NIC addresses, labels such as
// role=prefill, model, shard) and named regions (a descriptor and
// metadata), others look them up by name or label selector and watch the
// prefix for joins and leaves.
//
// A Directory has two backends: Memory, in process (tests, several engines
// on one host), and etcd (package fabric/directory/etcd, kept apart so
// that programs that do not use etcd do not link its client). In etcd an
// entry and its regions live under a lease the publishing process renews:
// a process that dies, hangs or is cut off from etcd disappears within the
// lease's TTL and watchers get a Lost event, while Publication.Close
// removes the entry at once and watchers get Closed. LoseOnLeave feeds
// those events to an engine's peer liveness (fabric.Engine.DeclarePeerLost),
// so transfers to an engine that left fail with a *fabric.PeerError instead
// of waiting for the engine's own checks.
//
// WaitFor waits until enough engines matching a selector are live (a
// process started late finding its peers); WorldConfig gathers a
// fixed-size world that way and gives ranks in name order, for
// fabric/rendezvous to join, instead of a launcher's environment.
//
// Everything read back is validated (EntryError, wrapping ErrInvalid,
// ErrTooLarge or ErrNICMismatch): a directory is shared, and a malformed,
// oversize or mismatched value a buggy or hostile writer left there is
// refused rather than handed to the engine. A region's descriptor must
// have its engine's NIC count and only addresses its engine published.
//
// Addresses carry their engine's incarnation (see fabric.Descriptor), so a
// region left behind by an engine that was replaced by a new one at the
// same endpoint is told apart when read back against the new entry: it
// is refused with an error wrapping fabric.ErrStaleDescriptor.
//
// Stored form, shared by both backends (JSON, version 1, at most
// MaxValueSize bytes): PREFIX/engines/NAME holds an entry, and
// PREFIX/regions/ENGINE/NAME a region. An orderly close first rewrites the
// entry marked closing, then removes it; a removal of an entry not so
// marked is a loss.
package directory
