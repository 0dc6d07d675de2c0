package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRunScriptTable runs scripts/gpu/run.sh on a fake .gpu/ folder whose
// "test binary" is a shell script printing go test output: it checks the
// table the script prints last and its exit status, without a GPU or Go.
func TestRunScriptTable(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../scripts/gpu/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("run.sh not found beside the package (%v)", err)
	}
	for _, s := range []string{"run.sh", "build.sh", "../deps.sh", "../deps-nvrtc.sh"} {
		if out, err := exec.Command(bash, "-n", filepath.Join(filepath.Dir(script), s)).CombinedOutput(); err != nil {
			t.Fatalf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	run := func(t *testing.T, fail bool) (string, error) {
		root := t.TempDir()
		for _, d := range []string{"scripts/gpu", ".gpu/bin", "pkg"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		b, _ := os.ReadFile(script)
		os.WriteFile(filepath.Join(root, "scripts/gpu/run.sh"), b, 0o755)
		status, exit := "PASS", "0"
		if fail {
			status, exit = "FAIL", "1"
		}
		fake := "#!/bin/sh\n[ -d ../pkg ] || { echo 'not run in its package dir'; exit 3; }\n" +
			"echo '=== RUN   TestA'\necho '--- " + status + ": TestA (0.50s)'\n" +
			"echo '    --- PASS: TestA/sub (0.10s)'\necho '--- SKIP: TestB (0.00s)'\n" +
			"echo 'BenchmarkCopy/64MiB-16   100   1000000 ns/op   67108.86 MB/s'\n" +
			"echo 'BenchmarkFlag/host-16   1000   4000 ns/op   3.100 p50_us   9.000 p99_us'\n" +
			"exit " + exit + "\n"
		os.WriteFile(filepath.Join(root, ".gpu/bin/pkg.test"), []byte(fake), 0o755)
		// bench-a2a prints its arguments as its table's row.
		os.WriteFile(filepath.Join(root, ".gpu/bin/bench-a2a"), []byte("#!/bin/sh\necho '# tokens mode'\necho \"  row $*\"\n"), 0o755)
		os.WriteFile(filepath.Join(root, ".gpu/manifest"), []byte("pkg.test pkg\n"), 0o644)
		cmd := exec.Command(bash, "scripts/gpu/run.sh")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(t, false)
	if err != nil {
		t.Fatalf("run.sh failed on a passing run: %v\n%s", err, out)
	}
	table := out[strings.Index(out, "GPU results"):]
	for _, want := range []string{
		"TestA", "PASS", "TestB", "SKIP", "67108.86 MB/s", "3.100 p50_us", "pass 1, fail 0, skip 1", "all passed",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// The bench-a2a tables: decode (8 ranks) and prefill (4), lock step
	// with graph replays and concurrent, on the GPU, one NVLink domain.
	for _, want := range []string{"decode-W8-lockstep", "decode-W8-concurrent", "prefill-W4-lockstep", "prefill-W4-concurrent"} {
		if !regexp.MustCompile(`bench-a2a +`+want+` +PASS`).MatchString(table) || !strings.Contains(table, "= bench-a2a "+want+" =") {
			t.Errorf("table lacks bench-a2a %s or its table:\n%s", want, table)
		}
	}
	for _, want := range []string{"--world-size 8 --nvlink 8 --tokens 128", "--world-size 4 --nvlink 4 --tokens 4096",
		"--mode lockstep --graph", "--mode concurrent --json", "--backend cuda"} {
		if !strings.Contains(table, want) {
			t.Errorf("no bench-a2a run with %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "TestA/sub") {
		t.Errorf("subtests belong in the log, not the table:\n%s", table)
	}
	out, err = run(t, true)
	if err == nil || !strings.Contains(out, "FAILURES") || !strings.Contains(out, "exit status 1") {
		t.Fatalf("failing run not reported (err %v):\n%s", err, out)
	}
}
