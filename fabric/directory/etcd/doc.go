// Package etcd is the etcd backend of fabric/directory: engines and
// regions kept in an etcd cluster under a key prefix, each publication
// under a lease its process renews (Config.TTL).
//
// It uses the official client (go.etcd.io/etcd/client/v3, v3.7) and is
// tested against Debian bookworm's etcd-server 3.4 started on loopback.
// When the server is unreachable, reads fail by their context's deadline
// while publications and watches wait for it: a restarted server keeps
// its leases (renewal goes on), one that lost its data gets every
// publication again under a new lease, and watches resume where they
// stopped, or list the prefix again and report the difference. Engines
// keep transferring meanwhile: the directory is not on the data path.
//
// ParseURL reads the etcd://HOST:PORT/PREFIX form tools take.
package etcd
