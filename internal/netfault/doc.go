// Package netfault injects network faults in user space, for kernels
// without netem: a Relay forwards IP packets between two TUN devices (one
// in each of two network namespaces the caller created) and drops, delays,
// jitters, reorders, duplicates or corrupts them with a seeded random
// source, or drops everything while the link is down. Namespaces and TUN
// devices are created with the helpers in netns_linux.go, which need root
// (CAP_NET_ADMIN and CAP_SYS_ADMIN).
//
// Corruption flips one byte past the IP header: the receiving stack's
// checksum then drops the packet, as a real corrupted frame would be
// dropped, so to TCP it is loss that the sender must notice.
package netfault
