package verbs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// The two-process test: the test binary runs itself again as a child; the
// two exchange addresses and keys over the child's stdin and stdout, the
// parent writes pages with immediates into the child, and the child, once
// it has counted them all, writes what it got back into the parent.

const (
	twoProcPages = 64
	twoProcPage  = 16 << 10
	twoProcBack  = 0xc0ffee
	childEnv     = "FERRY_VERBS_TWOPROC_CHILD"
)

func pattern(b []byte) {
	for i := range b {
		b[i] = byte(i*31 + i>>12)
	}
}

// endpoint is what one side tells the other.
type endpoint struct {
	addr rdma.Address
	base uint64
	key  uint64
}

func (e endpoint) line(tag string) string {
	return fmt.Sprintf("%s %s %d %d\n", tag, e.addr, e.base, e.key)
}

// readEndpoint scans r for a line "<tag> addr base key", skipping the test
// framework's own output.
func readEndpoint(r *bufio.Reader, tag string) (endpoint, error) {
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			return endpoint{}, fmt.Errorf("waiting for %s: %w", tag, err)
		}
		f := strings.Fields(s)
		if len(f) != 4 || f[0] != tag {
			continue
		}
		var e endpoint
		if e.addr, err = rdma.ParseAddress(f[1]); err != nil {
			return e, err
		}
		_, err = fmt.Sscan(f[2]+" "+f[3], &e.base, &e.key)
		return e, err
	}
}

func TestTwoProcess(t *testing.T) {
	infos := requireDevices(t, 1)
	cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcessChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+infos[0].Name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var childOut bytes.Buffer
	r := bufio.NewReader(io.TeeReader(stdout, &childOut))
	defer func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("child: %v\n%s%s", err, childOut.String(), stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("child did not exit\n%s", childOut.String())
		}
	}()

	// The first half is the source; the child writes back into the second.
	const half = twoProcPages * twoProcPage
	a := openT(t, infos[0], rdma.DomainOptions{}, 2*half)
	pattern(a.buf[:half])
	child, err := readEndpoint(r, "CHILD")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	go func() { io.Copy(io.Discard, r); exited <- cmd.Wait() }()
	me := endpoint{addr: a.Address(), base: uint64(addrOf(a.buf)) + half, key: a.keys.Remote}
	if _, err := io.WriteString(stdin, me.line("PARENT")); err != nil {
		t.Fatal(err)
	}
	peer, err := a.ResolvePeer(child.addr)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]rdma.WriteOp, twoProcPages)
	for i := range ops {
		off := uint64(i * twoProcPage)
		ops[i] = rdma.WriteOp{Local: uint64(addrOf(a.buf)) + off, Length: twoProcPage, LocalDesc: a.keys.Local,
			Remote: child.base + off, RemoteKey: child.key, Peer: peer, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm}
	}
	postAllWrites(t, a, ops)
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == twoProcPages && len(a.imms) == 1 }, a)
	for i := range twoProcPages {
		a.completedOK(uint64(i))
	}
	if a.imms[0] != twoProcBack {
		t.Fatalf("imm from child %#x", a.imms[0])
	}
	if !bytes.Equal(a.buf[half:], a.buf[:half]) {
		t.Fatal("data written back by the child differs")
	}
}

// TestTwoProcessChild is the child's half; it runs only under TestTwoProcess.
func TestTwoProcessChild(t *testing.T) {
	dev := os.Getenv(childEnv)
	if dev == "" {
		t.Skip("runs as the child of TestTwoProcess")
	}
	b := openT(t, rdma.DomainInfo{Name: dev}, rdma.DomainOptions{}, twoProcPages*twoProcPage)
	me := endpoint{addr: b.Address(), base: uint64(addrOf(b.buf)), key: b.keys.Remote}
	fmt.Print(me.line("CHILD"))
	in := bufio.NewReader(os.Stdin)
	parent, err := readEndpoint(in, "PARENT")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := b.ResolvePeer(parent.addr)
	if err != nil {
		t.Fatal(err)
	}
	pump(t, 30*time.Second, func() bool { return len(b.imms) == twoProcPages }, b)
	want := make([]byte, len(b.buf))
	pattern(want)
	if !bytes.Equal(b.buf, want) {
		t.Fatal("child: pages differ")
	}
	postAllWrites(t, b, []rdma.WriteOp{{Local: uint64(addrOf(b.buf)), Length: uint64(len(b.buf)), LocalDesc: b.keys.Local,
		Remote: parent.base, RemoteKey: parent.key, Peer: peer, Context: 1, Imm: twoProcBack, Flags: rdma.WriteHasImm}})
	pump(t, 30*time.Second, func() bool { return len(b.byCtx) == 1 }, b)
	b.completedOK(1)
	// Keep the domain open until the parent is done with it.
	io.Copy(io.Discard, in)
}
