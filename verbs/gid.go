package verbs

import (
	"fmt"
	"net"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// chooseGID picks the source GID of a port. On InfiniBand it is index 0.
// On RoCE it is never "index 0 because it is first": on rxe, index 0 is the
// link-local IPv6 GID and mlx5 lists RoCE v1 and v2 pairs. The rank is
// RoCE v2 with an IPv4 address, then RoCE v2 routable IPv6, then RoCE v2
// link-local, then RoCE v1 in the same order; ties go to the lower index.
// A non-empty node that parses as an IP picks the GID of that address.
func chooseGID(link ibv.LinkLayer, gids []ibv.GIDEntry, node string) (ibv.GIDEntry, error) {
	if len(gids) == 0 {
		return ibv.GIDEntry{}, fmt.Errorf("verbs: port has no GID: %w", rdma.ErrNotSupported)
	}
	if link != ibv.LinkEthernet {
		for _, g := range gids {
			if g.Index == 0 {
				return g, nil
			}
		}
		return gids[0], nil
	}
	if ip := net.ParseIP(node); ip != nil {
		best, found := ibv.GIDEntry{}, false
		for _, g := range gids {
			if net.IP(g.GID[:]).Equal(ip) && (!found || gidRank(g) > gidRank(best)) {
				best, found = g, true
			}
		}
		if !found {
			return ibv.GIDEntry{}, fmt.Errorf("verbs: no GID for address %s: %w", node, rdma.ErrInvalidArgument)
		}
		return best, nil
	}
	best := gids[0]
	for _, g := range gids[1:] {
		if gidRank(g) > gidRank(best) {
			best = g
		}
	}
	return best, nil
}

func gidRank(g ibv.GIDEntry) int {
	ip := net.IP(g.GID[:])
	r := 1
	switch {
	case ip.To4() != nil:
		r = 3
	case !ip.IsLinkLocalUnicast():
		r = 2
	}
	if g.Type == ibv.GIDTypeRoCEv2 {
		r += 10
	}
	return r
}
