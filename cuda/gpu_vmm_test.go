package cuda

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

const vmmChildEnv = "FERRY_TEST_VMM_CHILD"

// TestGPUVMMExportImport exports a VMM allocation to a second process (this
// test binary, re-executed), which maps it, checks the parent's data and
// writes its own; the parent then sees the child's data.
func TestGPUVMMExportImport(t *testing.T) {
	if os.Getenv(vmmChildEnv) == "1" {
		vmmChild(t)
		return
	}
	c := requireCUDA(t)
	info := try(c.Device().Info()).must(t)
	if !info.VMM || !info.PosixFDExport {
		testutil.SkipIfNotSupported(t, "vmm", wrapNotSupported("VMM with POSIX fd export"))
	}
	m, err := c.AllocVMM(3<<20, VMMOptions{Exportable: true, GPUDirectRDMA: info.GPUDirectVMM})
	check(t, err)
	defer m.Close()
	t.Logf("VMM allocation: %d bytes (GPUDirect RDMA %v)", m.Size(), info.GPUDirectVMM)
	check(t, m.CopyFromHost(0, pattern(1, int(m.Size()))))

	conn, remote, err := SocketPair()
	check(t, err)
	defer conn.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUVMMExportImport$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), vmmChildEnv+"=1")
	cmd.ExtraFiles = []*os.File{remote}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	check(t, cmd.Start())
	remote.Close()
	defer func() {
		conn.Close() // unblocks a child still waiting for the memory
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v\n%s", err, out.String())
		}
	}()
	check(t, SendMemory(conn, m))
	// The child answers with one byte once it has written its pattern.
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	ack := make([]byte, 1)
	if _, err := conn.Read(ack); err != nil || ack[0] != 'k' {
		t.Fatalf("child ack: %q %v\n%s", ack, err, out.String())
	}
	got := make([]byte, m.Size())
	check(t, m.CopyToHost(got, 0))
	if !bytes.Equal(got, pattern(2, int(m.Size()))) {
		t.Fatal("the child's writes are not visible in the parent")
	}
}

func vmmChild(t *testing.T) {
	conn, err := UnixConnFromFile(os.NewFile(3, "ipc"))
	check(t, err)
	defer conn.Close()
	c := requireCUDA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := ReceiveMemory(ctx, conn, c)
	check(t, err)
	defer m.Close()
	got := make([]byte, m.Size())
	check(t, m.CopyToHost(got, 0))
	if !bytes.Equal(got, pattern(1, int(m.Size()))) {
		t.Fatal("imported memory does not hold the parent's data")
	}
	check(t, m.CopyFromHost(0, pattern(2, int(m.Size()))))
	check(t, c.Synchronize())
	if _, err := conn.Write([]byte{'k'}); err != nil {
		t.Fatal(err)
	}
}

func TestGPUPeerAccess(t *testing.T) {
	c := requireCUDA(t)
	n := try(DeviceCount()).must(t)
	if n < 2 {
		t.Skipf("peer access needs 2 devices, this machine has %d", n)
	}
	d1 := try(GetDevice(1)).must(t)
	ok := try(c.Device().CanAccessPeer(d1)).must(t)
	if !ok {
		t.Skipf("%s cannot access %s", c.Device(), d1)
	}
	c1 := try(d1.PrimaryContext()).must(t)
	defer c1.Close()
	check(t, c.EnablePeerAccess(c1))
	check(t, c.EnablePeerAccess(c1)) // twice is fine
	a := try(c.Alloc(1 << 20)).must(t)
	defer a.Close()
	b := try(c1.Alloc(1 << 20)).must(t)
	defer b.Close()
	check(t, a.CopyFromHost(0, pattern(3, 1<<20)))
	check(t, c.CopyDtoD(b.Ptr(), a.Ptr(), 1<<20))
	got := make([]byte, 1<<20)
	check(t, b.CopyToHost(got, 0))
	if !bytes.Equal(got, pattern(3, 1<<20)) {
		t.Fatal("peer copy")
	}
	check(t, c.DisablePeerAccess(c1))
}

func wrapNotSupported(what string) error {
	return &Error{Op: what, Code: 801}
}
