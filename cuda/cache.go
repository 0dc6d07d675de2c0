package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// kernelCache keeps compiled cubins on disk, one file per key. Writes go
// to a temporary file renamed into place, so concurrent processes never
// read a partial entry.
type kernelCache struct{ dir string } // "" disables it

const cacheSchema = "ferry-kernel-cache-v2"

func newKernelCache(dir string) kernelCache {
	if dir == "" {
		dir = cacheDirOption()
	}
	if dir == "off" {
		return kernelCache{}
	}
	if dir == "" {
		dir = defaultCacheDir()
	}
	return kernelCache{dir: dir}
}

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "ferry", "cuda-kernels")
	}
	return filepath.Join(os.TempDir(), "ferry-cuda-kernels-"+strconv.Itoa(os.Getuid()))
}

// cacheKey hashes every input that changes the cubin. Each field is
// length-prefixed so that no two different inputs can concatenate to the
// same bytes.
func cacheKey(src Source, arch string, nvrtcMajor, nvrtcMinor int, options []string) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(cacheSchema)
	field(deviceHeader) // included before every source
	field(src.Name)
	field(src.Code)
	field(arch)
	field(strconv.Itoa(nvrtcMajor) + "." + strconv.Itoa(nvrtcMinor))
	for _, o := range options {
		field(o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (k kernelCache) path(key string) string { return filepath.Join(k.dir, key+".cubin") }

var elfMagic = []byte{0x7f, 'E', 'L', 'F'}

// get returns a cached cubin; anything that is not an ELF image is
// treated as absent.
func (k kernelCache) get(key string) ([]byte, bool) {
	if k.dir == "" {
		return nil, false
	}
	b, err := os.ReadFile(k.path(key))
	if err != nil || !bytes.HasPrefix(b, elfMagic) {
		return nil, false
	}
	return b, true
}

func (k kernelCache) put(key string, cubin []byte) error {
	if k.dir == "" {
		return nil
	}
	if err := os.MkdirAll(k.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(k.dir, key+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(cubin)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), k.path(key))
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

func (k kernelCache) remove(key string) {
	if k.dir != "" {
		os.Remove(k.path(key))
		os.Remove(k.notePath(key))
	}
}

// The architecture a cubin was compiled for, when it is not the one asked
// for, lives beside it: "<arch>\n<note>".
func (k kernelCache) notePath(key string) string { return filepath.Join(k.dir, key+".arch") }

func (k kernelCache) putNote(key, arch, note string) {
	if k.dir == "" || note == "" {
		return
	}
	os.WriteFile(k.notePath(key), []byte(arch+"\n"+note), 0o644) // best effort
}

// getNote returns the architecture and note recorded for key, or asked
// and "" when none was recorded.
func (k kernelCache) getNote(key, asked string) (arch, note string) {
	if k.dir == "" {
		return asked, ""
	}
	b, err := os.ReadFile(k.notePath(key))
	if err != nil {
		return asked, ""
	}
	arch, note, ok := strings.Cut(string(b), "\n")
	if !ok || arch == "" {
		return asked, ""
	}
	return arch, note
}
