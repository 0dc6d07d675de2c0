//go:build cgo

package efa

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// shmNonce distinguishes this process from earlier ones with its pid.
var shmNonce = rand.Uint32()

// Domain is one libfabric FI_EP_RDM endpoint with its own fabric, domain,
// completion queue and address vector: ferry's model of one NIC. It
// implements rdma.Domain.
//
// A Domain is not safe for concurrent use: like libfabric's FI_THREAD_DOMAIN
// model, it belongs to the one goroutine (the engine's worker) that opened
// it. Its methods never block, except Close.
type Domain struct {
	info      rdma.DomainInfo
	transport string // libfabric provider name as given to fi_getinfo
	provName  string // what libfabric reports, for error messages
	ep        *ofi.Endpoint
	addr      rdma.Address
	ownAddr   []byte
	strAddr   bool   // FI_ADDR_STR addresses (shm)
	shmName   string // our /dev/shm region name (shm), removed at Close
	mrMode    uint64
	hmem      bool

	peers   map[rdma.Address]rdma.PeerID
	mrs     map[uintptr]*ofi.MR
	nextKey uint64
	errs    errRing

	// Unreachable-peer detection, see refused.
	connectTimeout time.Duration
	stalls         map[rdma.PeerID]time.Time
	dead           map[rdma.PeerID]struct{}

	// Liveness (liveness.go): peer names by handle, and the lock this
	// endpoint holds on its own shm region file while it is open.
	names   map[rdma.PeerID]string
	shmLock *os.File
	watch   *deathWatch // shm peers' processes (deathwatch.go), from the first named with a pid

	// The region heartbeats from peers write into (tcp).
	probeBuf []byte
	probeMR  *ofi.MR

	// Incarnation checks (incarnation.go), tcp only.
	incSrv   *incServer
	incPeers map[rdma.PeerID]*incClient
}

var _ rdma.Domain = (*Domain)(nil)

// shmSeq makes shm endpoint names unique within the process even when the
// engine reuses an Instance number after closing a domain.
var shmSeq atomic.Uint64

// Open opens a domain listed by Domains. Opening the same DomainInfo several
// times gives independent endpoints, which is how tests emulate several
// NICs on loopback; opts.Instance keeps their names apart. Failures unwind
// everything opened so far.
func Open(info rdma.DomainInfo, opts rdma.DomainOptions) (*Domain, error) {
	if opts.QueueDepth < 0 {
		return nil, fmt.Errorf("libfabric open: queue depth %d: %w", opts.QueueDepth, rdma.ErrInvalidArgument)
	}
	l, p, err := getInfo(info.Transport, opts)
	if err != nil {
		return nil, err
	}
	defer l.Free()
	var chosen *ofi.Info
	for _, in := range l.Infos() {
		if in.DomainName() == info.Name && unusable(in) == "" {
			chosen = &in
			break
		}
	}
	if chosen == nil {
		return nil, fmt.Errorf("libfabric %s: no domain named %q: %w", info.Transport, info.Name, rdma.ErrNotSupported)
	}
	srcName := ""
	if chosen.AddrFormat() == ofi.AddrFormatStr && chosen.ProvName() == "shm" {
		// Two shm endpoints of one process would otherwise race for the
		// same name (and the same /dev/shm file). The random part keeps a
		// process that reuses the pid of one that died without closing
		// (its file is still in /dev/shm) from failing with EBUSY, and
		// keeps apart processes of pid namespaces sharing /dev/shm.
		srcName = fmt.Sprintf("ferry-%d-%08x-%d-%d", os.Getpid(), shmNonce, opts.Instance, shmSeq.Add(1))
		reapShmFiles()
	}
	// The CQ takes initiator completions and incoming immediates alike, so
	// leave room for both directions at full depth.
	cqSize := 0
	if opts.QueueDepth > 0 {
		cqSize = max(4*opts.QueueDepth, 1024)
	}
	ep, err := ofi.Open(*chosen, cqSize, p.efa, srcName)
	if err != nil {
		return nil, callError(info.Transport, "open", err)
	}
	// What the chosen entry says, not the listing's: the engine splits
	// longer writes and fences their immediates by these.
	info.MaxWrite, info.OrderedWrites = chosen.MaxMsgSize(), chosen.WritesOrdered()
	d := &Domain{
		info:      info,
		transport: info.Transport,
		ep:        ep,
		peers:     make(map[rdma.Address]rdma.PeerID),
		mrs:       make(map[uintptr]*ofi.MR),

		connectTimeout: opts.HandshakeTimeout,
		dead:           make(map[rdma.PeerID]struct{}),
		stalls:         make(map[rdma.PeerID]time.Time),
		names:          make(map[rdma.PeerID]string),
		shmName:        srcName,
	}
	if d.connectTimeout <= 0 {
		d.connectTimeout = 10 * time.Second
	}
	neg := ep.Info()
	d.provName = neg.ProvName()
	d.mrMode = neg.MRMode()
	d.hmem = neg.Caps()&ofi.CapHMEM != 0
	d.strAddr = neg.AddrFormat() == ofi.AddrFormatStr
	// Writes followed by a notification (rdma.WriteVisible) must complete
	// only once visible at the target. shm completes a write once its
	// copy into the target is done, which is that already (and libfabric
	// 1.17's shm never completed delivery-complete writes posted on
	// several endpoints of one process at once); tcp completes a write
	// once sent, and so does efa for the writes it emulates over sends
	// (see "Write completion" in doc.go), so they ask for delivery.
	if d.provName != "shm" {
		ep.VisibleNeedsDelivery()
	}
	d.info.Provider = ProviderName
	if srcName != "" {
		d.lockShmRegion()
	}
	if err := d.openProbeRegion(); err != nil {
		d.unlockShmRegion()
		ep.Close()
		return nil, err
	}
	name, err := ep.Name()
	if err == nil {
		d.ownAddr = name
		d.addr, err = rdma.NewAddress(name, opts.Incarnation)
		if _, ip, port, ok := sockaddrOf(name); err == nil && ok && opts.Incarnation != 0 && strings.HasPrefix(d.provName, "tcp") {
			d.incPeers = make(map[rdma.PeerID]*incClient)
			var serr error
			d.incSrv, serr = startIncServer(ip, port, opts.Incarnation)
			if serr != nil && opts.Port > 0 {
				// A pinned port is asked for to be restarted on, which is
				// when the check matters; a port the system chose whose
				// UDP twin is taken goes unchecked by its peers.
				err = serr
			}
		}
	} else {
		err = callError(d.transport, "fi_getname", err)
	}
	if err != nil {
		_ = d.closeProbeRegion()
		d.unlockShmRegion()
		ep.Close()
		return nil, err
	}
	return d, nil
}

// Info describes the domain.
func (d *Domain) Info() rdma.DomainInfo { return d.info }

// Address is the endpoint's address (fi_getname).
func (d *Domain) Address() rdma.Address { return d.addr }

// MRMode is the negotiated mr_mode (FI_MR_* bits), for diagnostics.
func (d *Domain) MRMode() uint64 { return d.mrMode }

// AddrMode says how peers address this domain's registered regions:
// rdma.AddrVirtual with FI_MR_VIRT_ADDR, else rdma.AddrOffset.
func (d *Domain) AddrMode() rdma.AddrMode {
	if d.mrMode&ofi.MRVirtAddr != 0 {
		return rdma.AddrVirtual
	}
	return rdma.AddrOffset
}

// ProviderName is libfabric's name for the provider actually opened, such
// as "tcp;ofi_rxm" when "tcp" was asked for.
func (d *Domain) ProviderName() string { return d.provName }

// ResolvePeer inserts a peer's address into the address vector the first
// time it is seen and returns its fi_addr_t. An address that cannot belong
// to this provider (wrong length or family for socket formats, wrong scheme
// for string formats) gives an error wrapping rdma.ErrInvalidArgument.
func (d *Domain) ResolvePeer(addr rdma.Address) (rdma.PeerID, error) {
	if d.ep == nil {
		return 0, errClosed
	}
	if id, ok := d.peers[addr]; ok {
		return id, nil
	}
	raw := addr.Raw()
	if name := string(bytes.TrimRight(raw, "\x00")); d.provName == "shm" && ferryShmName(name) {
		// ferry's shm names hold the pid and a per-process nonce: a
		// restarted process never takes the name again.
		if why := shmPeerGone(shmDir, name); why != "" {
			return 0, fmt.Errorf("resolve peer: %w", rdma.StaleError(addr, why))
		}
	}
	if err := d.checkPeerAddr(raw); err != nil {
		return 0, err
	}
	fa, err := d.ep.AVInsert(raw)
	if err != nil {
		return 0, callError(d.transport, "fi_av_insert", err)
	}
	id := rdma.PeerID(fa)
	if err := d.checkIncarnation(id, addr); err != nil {
		return 0, fmt.Errorf("resolve peer: %w", err)
	}
	d.peers[addr] = id
	d.names[id] = string(bytes.TrimRight(raw, "\x00"))
	d.watchPeerDeath(id, d.names[id])
	return id, nil
}

// checkPeerAddr rejects addresses of another format than ours before they
// reach fi_av_insert: several providers accept garbage there and fail
// later, far from the cause.
func (d *Domain) checkPeerAddr(raw []byte) error {
	if len(raw) == 0 {
		return fmt.Errorf("resolve peer: empty address: %w", rdma.ErrInvalidArgument)
	}
	own := d.ownAddr
	if d.strAddr {
		// String formats (shm) are printable names, NUL-terminated; when
		// ours has a scheme ("fi_shm://"), the peer's must have it too.
		name := bytes.TrimRight(raw, "\x00")
		ok := len(name) > 0
		for _, c := range name {
			ok = ok && c >= 0x20 && c < 0x7f
		}
		if i := bytes.Index(own, []byte("://")); i >= 0 {
			ok = ok && bytes.HasPrefix(raw, own[:i+3])
		}
		if !ok {
			return fmt.Errorf("resolve peer: %q is not a %s address: %w", raw, d.provName, rdma.ErrInvalidArgument)
		}
		// shm accepts any name and fails only at the first write; its
		// endpoints are files in /dev/shm, so look when ours is one.
		if d.provName == "shm" && shmFileExists(own) && !shmFileExists(raw) {
			return fmt.Errorf("resolve peer: no shm endpoint %q on this host: %w", name, rdma.ErrInvalidArgument)
		}
		return nil
	}
	if len(raw) != len(own) {
		return fmt.Errorf("resolve peer: %d-byte address, %s uses %d: %w", len(raw), d.provName, len(own), rdma.ErrInvalidArgument)
	}
	// Socket addresses start with the family; both ends use the same one.
	if len(own) >= 2 && !bytes.Equal(raw[:2], own[:2]) {
		return fmt.Errorf("resolve peer: address family %#x, %s uses %#x: %w",
			raw[:2], d.provName, own[:2], rdma.ErrInvalidArgument)
	}
	return nil
}

// Close deregisters every region still registered and closes the endpoint,
// address vector, completion queue, domain and fabric. Pending operations
// are dropped. It is idempotent; calls after the first return nil.
func (d *Domain) Close() error {
	if d.ep == nil {
		return nil
	}
	var first error
	for h, mr := range d.mrs {
		if err := mr.Close(); err != nil && first == nil {
			first = callError(d.transport, "fi_close(mr)", err)
		}
		delete(d.mrs, h)
	}
	if err := d.closeProbeRegion(); err != nil && first == nil {
		first = err
	}
	d.closeIncarnation()
	if err := d.ep.Close(); err != nil && first == nil {
		first = callError(d.transport, "fi_close", err)
	}
	d.ep = nil
	d.unlockShmRegion()
	d.stopDeathWatch()
	if d.shmName != "" {
		// libfabric 1.17's shm leaves the region file of an endpoint that
		// closes while a peer of the same process still maps it; the name
		// is ours alone, so remove it (on every version: removing a file
		// that is already gone costs nothing).
		_ = os.Remove("/dev/shm/" + d.shmName)
	}
	clear(d.peers)
	return first
}

var _ rdma.Abandoner = (*Domain)(nil)

// Abandon is Close, except on tcp providers of the libfabric versions
// whose tcp;ofi_rxm can crash inside fi_close of an endpoint that still
// has operations in flight on a connection that stopped moving (seen with
// a link that went down for good, and under a write flood; 1.17 and 2.1,
// see ofi.Generation): their endpoint is left open, unused (progress is
// manual: nothing touches it again), and the error says so.
func (d *Domain) Abandon() error {
	if d.ep == nil {
		return nil
	}
	if !strings.HasPrefix(d.provName, "tcp") || !ofi.Current().TCPCloseUnderFloodCrashes {
		return d.Close()
	}
	d.unlockShmRegion()
	d.stopDeathWatch()
	d.closeIncarnation()
	d.ep = nil
	return fmt.Errorf("libfabric %s endpoint left open, not closed: closing it with operations in flight can crash libfabric %s: %w",
		d.provName, ofi.Version(), rdma.ErrAbandoned)
}

// shmFileExists reports whether the shm endpoint name has its region file.
func shmFileExists(name []byte) bool {
	n := string(bytes.TrimRight(name, "\x00"))
	if n == "" || strings.ContainsAny(n, "/") {
		return false
	}
	_, err := os.Stat("/dev/shm/" + n)
	return err == nil
}
