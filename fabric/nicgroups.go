package fabric

// Unequal NIC groups: a writer of n NICs may write to a target whose
// descriptor lists m NICs (1, 2 or 4 each, in any pairing). Every write is
// posted on one of the writer's NICs and lands on one of the target's; the
// choice is made here, once per op context or per op, from integers alone
// (no allocation, no lock).
//
// When the writer has at least as many NICs as the target, local NIC d
// writes to target NIC d mod m: equal groups keep NIC i talking to NIC i
// (the same rail), and a wider writer folds its rails onto the target's.
// When the target is wider, a request's lanes (shards, page blocks,
// barrier destinations, scatter slices) are striped over the target's
// NICs by lane number, so a 1-NIC writer still spreads a sharded write
// over all 4 NICs of its target.

// remoteNIC returns the target NIC that lane of a request, posted on local
// NIC d of a group of n, writes to on a target of m NICs.
func remoteNIC(d, lane, n, m int) int {
	if n == m {
		return d
	}
	if n > m {
		return d % m
	}
	return lane % m
}

// scatterLane numbers target j's slice on local NIC d: with ShardBytes
// every NIC writes a slice of every target, and with the other routes d is
// the NIC of j's block, so consecutive targets and slices take consecutive
// target NICs.
func scatterLane(j, d, n int) int { return j*n + d }

// barrierKey is the remote key op number op of barrier context c writes
// through, for a worker of n NICs.
func (c *opCtx) barrierKey(op, n int) *RemoteKey {
	dst := &c.dsts[op]
	return &dst.NICs[remoteNIC(int(c.dom), c.first+op, n, len(dst.NICs))]
}

// scatterKey is the remote key op number op of scatter context c writes
// through, for a worker of n NICs.
func (c *opCtx) scatterKey(op, n int) *RemoteKey {
	t := &c.targets[op]
	return &t.Dst.NICs[remoteNIC(int(c.dom), scatterLane(c.first+op, int(c.dom), n), n, len(t.Dst.NICs))]
}

// lanes is how many lanes (shards of a single write, blocks of a paged
// write) a request spreads over by default between groups of n and m
// NICs: every NIC of the wider side carries one.
func lanes(n, m int) int { return max(n, m) }
