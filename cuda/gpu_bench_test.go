package cuda

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

func BenchmarkGPUCopyDtoD(b *testing.B) {
	c := requireCUDA(b)
	for _, size := range []uint64{1 << 20, 64 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			src := try(c.Alloc(size)).must(b)
			defer src.Close()
			dst := try(c.Alloc(size)).must(b)
			defer dst.Close()
			check(b, src.Memset(1))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				check(b, c.CopyDtoD(dst.Ptr(), src.Ptr(), size))
			}
		})
	}
}

// BenchmarkGPUFlagRoundTrip: the host sets a flag, a spinning kernel sees
// it and answers on a second flag, the host sees the answer. Reported as
// p50/p99 in microseconds per round trip.
func BenchmarkGPUFlagRoundTrip(b *testing.B) {
	c := requireCUDA(b)
	mod := flagsModule(b, c)
	echo := try(mod.Function("ferry_flag_echo")).must(b)
	kinds := []FlagKind{FlagHostMapped}
	if GDRAvailable() == nil {
		kinds = append(kinds, FlagGDR)
	}
	for _, kind := range kinds {
		b.Run(kind.String(), func(b *testing.B) {
			in := try(c.NewFlags(1, kind)).must(b)
			defer in.Close()
			out := try(c.NewFlags(1, FlagHostMapped)).must(b)
			defer out.Close()
			st := try(c.NewStream(true)).must(b)
			defer st.Close()
			fi, fo := in.Flag(0), out.Flag(0)
			n := b.N
			check(b, echo.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 32}, Stream: st},
				fi.DevicePtr(), fo.DevicePtr(), uint32(n), uint64(10e9)))
			lat := make([]time.Duration, 0, n)
			b.ResetTimer()
			for i := 1; i <= n; i++ {
				t0 := time.Now()
				fi.Set(uint32(i))
				for spins := 0; fo.Load() != uint32(i); spins++ {
					if spins&1023 == 0 && time.Since(t0) > 10*time.Second {
						b.Fatalf("round trip %d: no answer in 10 s", i)
					}
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			check(b, st.SynchronizeContext(ctx))
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99_us")
		})
	}
}

// BenchmarkGPUNVRTC: cold = NVRTC compile + module load every time;
// cached = the disk cache hit + module load.
func BenchmarkGPUNVRTC(b *testing.B) {
	c := requireCUDA(b)
	_, _, err := NVRTCVersion()
	testutil.SkipIfNotSupported(b, "nvrtc", err)
	src, err := KernelSource("flags.cu")
	check(b, err)
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			m, _, err := c.CompileModule(src, CompileOptions{CacheDir: "off"})
			check(b, err)
			m.Close()
		}
	})
	b.Run("cached", func(b *testing.B) {
		dir := b.TempDir()
		m, _, err := c.CompileModule(src, CompileOptions{CacheDir: dir})
		check(b, err)
		m.Close()
		for b.Loop() {
			m, st, err := c.CompileModule(src, CompileOptions{CacheDir: dir})
			check(b, err)
			if !st.CacheHit {
				b.Fatal("cache miss")
			}
			m.Close()
		}
	})
}
