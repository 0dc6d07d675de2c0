//go:build cgo

package ibv

/*
#cgo LDFLAGS: -libverbs
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_device *fy_dev_at(struct ibv_device **l, int i) { return l[i]; }
// ibv_query_port is a macro in verbs.h; cgo needs a function.
static int fy_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	return ibv_query_port(c, port, a);
}
static int fy_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t idx, uint8_t *gid, int *type) {
	struct ibv_gid_entry e;
	memset(&e, 0, sizeof(e));
	int rc = ibv_query_gid_ex(c, port, idx, &e, 0);
	if (rc)
		return rc;
	memcpy(gid, e.gid.raw, 16);
	*type = (int)e.gid_type;
	return 0;
}
static int fy_errno(void) { return errno; }
static void fy_clear_errno(void) { errno = 0; }
*/
import "C"

import (
	"runtime"
	"syscall"
	"unsafe"
)

// DeviceNames lists the verbs devices. On a machine without the RDMA
// subsystem the library fails with ENOSYS.
func DeviceNames() ([]DeviceName, error) {
	runtime.LockOSThread() // errno is per thread
	defer runtime.UnlockOSThread()
	C.fy_clear_errno()
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		e := Errno(C.fy_errno())
		if e == 0 {
			e = Errno(syscall.ENOSYS)
		}
		return nil, &OpError{Op: "ibv_get_device_list", Errno: e}
	}
	defer C.ibv_free_device_list(list)
	out := make([]DeviceName, 0, int(n))
	for i := 0; i < int(n); i++ {
		d := C.fy_dev_at(list, C.int(i))
		out = append(out, DeviceName{
			Name:      C.GoString(C.ibv_get_device_name(d)),
			IBDevPath: C.GoString(&d.ibdev_path[0]),
			DevPath:   C.GoString(&d.dev_path[0]),
		})
	}
	return out, nil
}

// Context is an open device (struct ibv_context) used for queries.
type Context struct {
	c     *C.struct_ibv_context
	owned bool
}

// OpenDevice opens the named device for queries.
func OpenDevice(name string) (*Context, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.fy_clear_errno()
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, &OpError{Op: "ibv_get_device_list", Errno: Errno(C.fy_errno())}
	}
	defer C.ibv_free_device_list(list)
	for i := 0; i < int(n); i++ {
		d := C.fy_dev_at(list, C.int(i))
		if C.GoString(C.ibv_get_device_name(d)) != name {
			continue
		}
		c := C.ibv_open_device(d)
		if c == nil {
			return nil, &OpError{Op: "ibv_open_device " + name, Errno: Errno(C.fy_errno())}
		}
		return &Context{c: c, owned: true}, nil
	}
	return nil, &OpError{Op: "open device " + name, Errno: Errno(syscall.ENODEV)}
}

// Close closes a context opened with OpenDevice; it does nothing for the
// context of a Dom, which the Dom closes.
func (c *Context) Close() error {
	if c == nil || c.c == nil || !c.owned {
		return nil
	}
	rc := C.ibv_close_device(c.c)
	c.c = nil
	if rc != 0 {
		return &OpError{Op: "ibv_close_device", Errno: Errno(C.fy_errno())}
	}
	return nil
}

// QueryDevice returns the device's attributes.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc := C.ibv_query_device(c.c, &a); rc != 0 {
		return DeviceAttr{}, &OpError{Op: "ibv_query_device", Errno: Errno(rc)}
	}
	return DeviceAttr{
		FWVersion:       C.GoString(&a.fw_ver[0]),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
		PhysPorts:       int(a.phys_port_cnt),
		MaxQP:           int(a.max_qp),
		MaxQPWR:         int(a.max_qp_wr),
		MaxCQE:          int(a.max_cqe),
		MaxSRQWR:        int(a.max_srq_wr),
		MaxMRSize:       uint64(a.max_mr_size),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
	}, nil
}

// QueryPort returns port's attributes (ports count from 1).
func (c *Context) QueryPort(port int) (PortAttr, error) {
	var a C.struct_ibv_port_attr
	if rc := C.fy_query_port(c.c, C.uint8_t(port), &a); rc != 0 {
		return PortAttr{}, &OpError{Op: "ibv_query_port", Errno: Errno(rc)}
	}
	return PortAttr{
		State:       PortState(a.state),
		MaxMTU:      MTU(a.max_mtu),
		ActiveMTU:   MTU(a.active_mtu),
		GIDTableLen: int(a.gid_tbl_len),
		LID:         uint16(a.lid),
		LinkLayer:   LinkLayer(a.link_layer),
		ActiveWidth: uint8(a.active_width),
		ActiveSpeed: uint8(a.active_speed),
		MaxMsgSize:  uint64(a.max_msg_sz),
	}, nil
}

// GIDs returns the populated entries of port's GID table (n entries are
// scanned; unpopulated ones fail to query and are left out).
func (c *Context) GIDs(port, n int) []GIDEntry {
	var out []GIDEntry
	for i := 0; i < n; i++ {
		var e GIDEntry
		var t C.int
		if C.fy_query_gid_ex(c.c, C.uint32_t(port), C.uint32_t(i), (*C.uint8_t)(unsafe.Pointer(&e.GID[0])), &t) != 0 {
			continue
		}
		if e.GID == ([16]byte{}) {
			continue
		}
		e.Index, e.Type = i, GIDType(t)
		out = append(out, e)
	}
	return out
}

// WCStatusString is ibv_wc_status_str.
func WCStatusString(status int) string {
	return C.GoString(C.ibv_wc_status_str(C.enum_ibv_wc_status(status)))
}
