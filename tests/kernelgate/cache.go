package kernelgate

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ferryrdma/ferry/cuda"
)

// The gate's cache: a compilation's cubin and ptxas log, keyed by
// everything that decides them (the NVRTC release and the library file
// that was loaded, the architecture, the options, the source and the
// device header). make test compiles every build at five
// generation/architecture pairs; with the cache, a second run on an
// unchanged tree only checks. nvdisasm's text is kept the same way
// (disassembleCached). FERRY_GATE_CACHE names the
// directory ("off": always compile); the default is the user cache
// directory's ferry/gate.

type cachedCompile struct {
	Arch, Note, Log string
	Cubin           []byte
}

func gateCacheDir() string {
	d := os.Getenv("FERRY_GATE_CACHE")
	if d == "off" {
		return ""
	}
	if d != "" {
		return d
	}
	u, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(u, "ferry", "gate")
}

func compileKey(src cuda.Source, header, arch string, opts []string) (string, bool) {
	major, minor, err := cuda.NVRTCVersion()
	if err != nil {
		return "", false
	}
	h := sha256.New()
	lib := os.Getenv("FERRY_NVRTC")
	if st, err := os.Stat(lib); err == nil {
		fmt.Fprintf(h, "%d %d\n", st.Size(), st.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "nvrtc %d.%d %q\narch %s\n", major, minor, lib, arch)
	for _, o := range opts {
		fmt.Fprintf(h, "opt %q\n", o)
	}
	fmt.Fprintf(h, "src %q %d\n%s\nhdr %d\n%s", src.Name, len(src.Code), src.Code, len(header), header)
	return hex.EncodeToString(h.Sum(nil)), true
}

// compileCached is cuda.CompileSource through the cache. A cache that
// cannot be read or written is passed by, never fatal.
func compileCached(src cuda.Source, header, arch string, opts []string) (cuda.CompileResult, error) {
	dir := gateCacheDir()
	key, ok := compileKey(src, header, arch, opts)
	if dir == "" || !ok {
		return cuda.CompileSourceWithHeader(src, header, arch, opts...)
	}
	path := filepath.Join(dir, key+".json")
	if b, err := os.ReadFile(path); err == nil {
		var c cachedCompile
		if json.Unmarshal(b, &c) == nil && len(c.Cubin) > 0 {
			return cuda.CompileResult{Image: c.Cubin, Arch: c.Arch, Note: c.Note, Log: c.Log}, nil
		}
	}
	res, err := cuda.CompileSourceWithHeader(src, header, arch, opts...)
	if err != nil {
		return res, err
	}
	if b, err := json.Marshal(cachedCompile{Arch: res.Arch, Note: res.Note, Log: res.Log, Cubin: res.Image}); err == nil {
		if os.MkdirAll(dir, 0o755) == nil {
			tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}
	return res, nil
}

// disassembleCached is d.run through the cache: the text, gzip'd, keyed
// by the cubin and the nvdisasm binary (path, size, time).
func disassembleCached(d NVDisasm, cubin []byte) (string, error) {
	dir := gateCacheDir()
	st, err := os.Stat(d.Path)
	if dir == "" || err != nil {
		return d.run(cubin)
	}
	h := sha256.New()
	fmt.Fprintf(h, "nvdisasm -c -gi %q %d %d\n", d.Path, st.Size(), st.ModTime().UnixNano())
	h.Write(cubin)
	path := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))+".sass.gz")
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			if b, err := io.ReadAll(zr); err == nil && len(b) > 0 {
				return string(b), nil
			}
		}
	}
	text, err := d.run(cubin)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(text)); err == nil && zw.Close() == nil && os.MkdirAll(dir, 0o755) == nil {
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		if os.WriteFile(tmp, buf.Bytes(), 0o644) == nil {
			_ = os.Rename(tmp, path)
		}
	}
	return text, nil
}
