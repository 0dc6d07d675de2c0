package cuda

import (
	"errors"
	"os"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// noDriverPath is a driver that cannot exist; the test re-runs itself with
// it so that it also checks the no-driver contract on a machine that has a
// driver.
const noDriverPath = "/nonexistent/ferry-test/libcuda.so.1"

// TestNoDriver checks that without a driver every entry point returns an
// error wrapping ErrNotSupported, and nothing panics.
func TestNoDriver(t *testing.T) {
	if os.Getenv("FERRY_CUDA_DRIVER") != noDriverPath {
		testutil.RunTest(t, "TestNoDriver", testutil.SpawnOptions{Env: []string{"FERRY_CUDA_DRIVER=" + noDriverPath,
			"FERRY_NVRTC=/nonexistent/libnvrtc.so", "FERRY_GDRCOPY=/nonexistent/libgdrapi.so"}})
		return
	}
	notSupported := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v does not wrap ErrNotSupported", what, err)
		}
	}
	notSupported("Init", Init())
	_, err := DriverVersion()
	notSupported("DriverVersion", err)
	_, err = DeviceCount()
	notSupported("DeviceCount", err)
	_, err = GetDevice(0)
	notSupported("GetDevice", err)
	_, err = Devices()
	notSupported("Devices", err)
	var d Device
	_, err = d.Info()
	notSupported("Device.Info", err)
	_, err = d.Name()
	notSupported("Device.Name", err)
	_, _, err = d.ComputeCapability()
	notSupported("Device.ComputeCapability", err)
	_, err = d.PCIBusID()
	notSupported("Device.PCIBusID", err)
	_, err = d.SMCount()
	notSupported("Device.SMCount", err)
	_, err = d.CanAccessPeer(d)
	notSupported("Device.CanAccessPeer", err)
	_, err = d.PrimaryContext()
	notSupported("Device.PrimaryContext", err)
	_, _, err = NVRTCVersion()
	notSupported("NVRTCVersion", err)
	_, err = Compile(Source{Name: "k.cu", Code: "extern \"C\" __global__ void k() {}"}, "sm_90a")
	notSupported("Compile", err)
	_, err = DmabufFD(0x1000, 4096)
	notSupported("DmabufFD", err)
	_, err = DmabufRange(0x1000, 10)
	notSupported("DmabufRange", err)
	_, err = LookupPointer(0x1000)
	notSupported("LookupPointer", err)
	notSupported("GDRAvailable", GDRAvailable())
	if DriverPath() != "" {
		t.Error("DriverPath set without a driver")
	}
	// The failure is cached, and the library can no longer be changed.
	notSupported("Init again", Init())
	if err := Configure(Options{}); !errors.Is(err, ErrBusy) {
		t.Errorf("Configure after a load attempt: %v", err)
	}
}
