package netfault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Namespace is a network namespace created with iproute2 ("ip netns add"),
// so that programs can be started in it with "ip netns exec".
type Namespace struct {
	Name string
}

// Path is the namespace's bind mount, for setns.
func (n Namespace) Path() string { return "/var/run/netns/" + n.Name }

// NewNamespace creates a network namespace with its loopback up.
func NewNamespace(name string) (Namespace, error) {
	if err := ip("netns", "add", name); err != nil {
		return Namespace{}, err
	}
	n := Namespace{Name: name}
	if err := n.IP("link", "set", "lo", "up"); err != nil {
		_ = n.Delete()
		return Namespace{}, err
	}
	return n, nil
}

// Delete removes the namespace (its devices go with it).
func (n Namespace) Delete() error { return ip("netns", "del", n.Name) }

// IP runs "ip -n <namespace> args...".
func (n Namespace) IP(args ...string) error {
	return ip(append([]string{"-n", n.Name}, args...)...)
}

// Command returns cmd run inside the namespace ("ip netns exec").
func (n Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// OpenTUN creates a TUN device named dev inside namespace n (no packet
// information header: each read and write is one IP packet) and returns
// it; the caller configures it with n.IP. The device lives as long as the
// returned file is open.
func (n Namespace) OpenTUN(dev string) (*os.File, error) {
	var fd int
	err := inNamespace(n.Path(), func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(dev)
		if err == nil {
			ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
			err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		}
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("create tun %s: %w", dev, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dev), nil
}

// inNamespace runs f on an OS thread moved into the network namespace at
// path, then moves the thread back. A thread that cannot be moved back is
// left locked, so the runtime retires it instead of reusing it.
func inNamespace(path string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	ns, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", path, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Link is two namespaces joined by a Relay between a TUN device in each,
// addressed point to point: A has AddrA, B has AddrB.
type Link struct {
	A, B         Namespace
	AddrA, AddrB string
	Relay        *Relay
}

// NewLink creates namespaces prefix+"a" and prefix+"b", a TUN device dev
// in each with the given MTU and addresses, and the relay between them.
func NewLink(prefix, dev string, mtu int, addrA, addrB string, imp Impairments) (*Link, error) {
	l := &Link{AddrA: addrA, AddrB: addrB}
	var err error
	if l.A, err = NewNamespace(prefix + "a"); err != nil {
		return nil, err
	}
	if l.B, err = NewNamespace(prefix + "b"); err != nil {
		_ = l.A.Delete()
		return nil, err
	}
	fail := func(err error) (*Link, error) {
		_ = l.Close()
		return nil, err
	}
	ta, err := l.A.OpenTUN(dev)
	if err != nil {
		return fail(err)
	}
	tb, err := l.B.OpenTUN(dev)
	if err != nil {
		ta.Close()
		return fail(err)
	}
	l.Relay = NewRelay(ta, tb, imp)
	for _, c := range []struct {
		n          Namespace
		self, peer string
	}{{l.A, addrA, addrB}, {l.B, addrB, addrA}} {
		if err := c.n.IP("addr", "add", c.self, "peer", c.peer, "dev", dev); err != nil {
			return fail(err)
		}
		if err := c.n.IP("link", "set", dev, "mtu", fmt.Sprint(mtu), "up"); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

// Close stops the relay and deletes both namespaces.
func (l *Link) Close() error {
	var errs []error
	if l.Relay != nil {
		errs = append(errs, l.Relay.Close())
	}
	for _, n := range []Namespace{l.A, l.B} {
		if n.Name != "" {
			errs = append(errs, n.Delete())
		}
	}
	return errors.Join(errs...)
}
