package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shmPackage is the one package that may create memory files and send
// file descriptors (ARCHITECTURE.md: shared memory lives in internal/).
// Anywhere else, a second copy of either would drift from it: seals
// forgotten, a wait without a deadline, descriptors leaked on a
// malformed message.
const shmPackage = "internal/shm"

// shmViolations scans the non-test Go sources under root (a module root)
// outside shmPackage, and returns one line per call that creates a
// memory file (memfd_create) or sends descriptors (SCM_RIGHTS): through
// golang.org/x/sys/unix or syscall, MemfdCreate, the SYS_MEMFD_CREATE
// system call number, UnixRights (the control message every descriptor
// send is built from), or Sendmsg/SendmsgN given a control message.
func shmViolations(root string) ([]string, error) {
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if rel, _ := filepath.Rel(root, path); filepath.ToSlash(rel) == shmPackage {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		sys := map[string]bool{} // local names of the syscall packages
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != "golang.org/x/sys/unix" && p != "syscall" {
				continue
			}
			local := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			sys[local] = true
		}
		if len(sys) == 0 {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		report := func(n ast.Node, what string) {
			found = append(found, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), fset.Position(n.Pos()).Line, what))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				pkg, ok := n.X.(*ast.Ident)
				if !ok || !sys[pkg.Name] {
					return true
				}
				switch n.Sel.Name {
				case "MemfdCreate", "SYS_MEMFD_CREATE":
					report(n, pkg.Name+"."+n.Sel.Name+" creates a memory file")
				case "UnixRights":
					report(n, pkg.Name+".UnixRights builds an SCM_RIGHTS message")
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !sys[pkg.Name] || (sel.Sel.Name != "Sendmsg" && sel.Sel.Name != "SendmsgN") || len(n.Args) < 3 {
					return true
				}
				if oob, ok := n.Args[2].(*ast.Ident); !ok || oob.Name != "nil" {
					report(n, pkg.Name+"."+sel.Sel.Name+" with a control message may send descriptors")
				}
			}
			return true
		})
		return nil
	})
	return found, err
}

// TestArchShmOnly: nothing outside internal/shm creates memory files or
// sends descriptors.
func TestArchShmOnly(t *testing.T) {
	found, err := shmViolations("..")
	require.NoError(t, err)
	require.Empty(t, found, "memfd_create and SCM_RIGHTS belong to %s (shm.Create, shm.Send)", shmPackage)
}

// TestArchShmRuleCatchesViolations plants violations in a scratch module
// and checks the rule reports each, and nothing else: not internal/shm
// itself, not tests, not Sendmsg without a control message.
func TestArchShmRuleCatchesViolations(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("go.mod", "module example.com/m\n")
	write("memfd/a.go", `package memfd

import "golang.org/x/sys/unix"

func f() (int, error) { return unix.MemfdCreate("x", 0) }
`)
	write("rights/b.go", `package rights

import (
	"net"

	sys "syscall"
)

func g(c *net.UnixConn, fd int) error {
	_, _, err := c.WriteMsgUnix([]byte{1}, sys.UnixRights(fd), nil)
	return err
}
`)
	write("raw/c.go", `package raw

import "golang.org/x/sys/unix"

func h(s int, oob []byte) error {
	if err := unix.Sendmsg(s, []byte{1}, nil, nil, 0); err != nil {
		return err
	}
	_, err := unix.Syscall(unix.SYS_MEMFD_CREATE, 0, 0, 0)
	_ = err
	return unix.Sendmsg(s, []byte{1}, oob, nil, 0)
}
`)
	write("internal/shm/ok.go", `package shm

import "golang.org/x/sys/unix"

func ok() (int, error) { return unix.MemfdCreate("x", 0) }
`)
	write("memfd/a_test.go", `package memfd

import "golang.org/x/sys/unix"

func ok() []byte { return unix.UnixRights(1) }
`)
	found, err := shmViolations(root)
	require.NoError(t, err)
	require.Equal(t, []string{
		"memfd/a.go:5: unix.MemfdCreate creates a memory file",
		"raw/c.go:9: unix.SYS_MEMFD_CREATE creates a memory file",
		"raw/c.go:11: unix.Sendmsg with a control message may send descriptors",
		"rights/b.go:10: sys.UnixRights builds an SCM_RIGHTS message",
	}, found)
}
