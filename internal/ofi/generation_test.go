//go:build cgo

package ofi

import (
	"testing"
)

var (
	v117 = MakeVersion(1, 17)
	v122 = MakeVersion(1, 22)
	v20  = MakeVersion(2, 0)
	v21  = MakeVersion(2, 1)
	v23  = MakeVersion(2, 3)
)

// TestGenerationAPI: the API version asked for is the oldest of the
// headers', the library's and the newest this code was checked against.
func TestGenerationAPI(t *testing.T) {
	for _, c := range []struct{ runtime, header, want LibVersion }{
		{v117, v117, v117},
		{v21, v117, v117}, // a 1.17 build on an EFA installer's 2.x
		{v117, v21, v117}, // a 2.1 build on an older library
		{v21, v21, v21},
		{v23, v23, v21}, // newer than ferry knows: ask for what it knows
		{v122, v122, v122},
	} {
		if got := GenerationOf(c.runtime, c.header).API; got != c.want {
			t.Errorf("runtime %s, headers %s: API %s, want %s", c.runtime, c.header, got, c.want)
		}
	}
	if s := v21.String(); s != "2.1" {
		t.Errorf("String %q", s)
	}
}

// TestClassifyShm2: libfabric 2.x's shm reports the target side of a write
// with remote CQ data as FI_REMOTE_CQ_DATA alone; from 2.0 on that is an
// immediate, on 1.x an entry ferry cannot place (never seen there).
func TestClassifyShm2(t *testing.T) {
	shm2 := CompRemoteCQData
	if got := GenerationOf(v21, v21).Classify(shm2); got != EventImm {
		t.Errorf("2.1: FI_REMOTE_CQ_DATA alone classified %d, want EventImm", got)
	}
	if got := GenerationOf(v20, v117).Classify(shm2); got != EventImm {
		t.Errorf("2.0 runtime, 1.17 headers: classified %d, want EventImm", got)
	}
	if got := GenerationOf(v117, v117).Classify(shm2); got != 0 {
		t.Errorf("1.17: FI_REMOTE_CQ_DATA alone classified %d, want 0", got)
	}
	if !GenerationOf(v21, v21).ImmByData || GenerationOf(v122, v122).ImmByData {
		t.Error("ImmByData must be set from 2.0 on only")
	}
}

// TestClassifyCommon: what every generation reports classifies the same
// on all of them (flags seen on 1.17 and 2.1, shm and tcp;ofi_rxm).
func TestClassifyCommon(t *testing.T) {
	for _, g := range []Generation{GenerationOf(v117, v117), GenerationOf(v21, v21)} {
		for _, c := range []struct {
			name  string
			flags uint64
			want  uint32
		}{
			{"initiator write", CompRMA | CompWrite, EventWrite},
			{"shm 1.17 target write with data", CompRMA | CompRemoteWrite | CompRemoteCQData, EventImm},
			{"tcp target write with data", CompRemoteWrite | CompRemoteCQData, EventImm},
			{"sockets initiator write with data flag", CompRMA | CompWrite | CompRemoteCQData, EventWrite},
			{"send", CompMsg | CompSend, EventSend},
			{"receive", CompMsg | CompRecv, EventRecv},
			{"receive with data", CompMsg | CompRecv | CompRemoteCQData, EventRecv},
			{"no flags", 0, 0},
		} {
			if got := g.Classify(c.flags); got != c.want {
				t.Errorf("libfabric %s: %s (%#x) classified %d, want %d", g.Runtime, c.name, c.flags, got, c.want)
			}
		}
	}
}
