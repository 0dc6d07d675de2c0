package main

import (
	"reflect"
	"strings"
	"testing"
)

// The spellings fabric-debug shares, and the earlier ones kept as aliases,
// parse to the same options; a spawned child gets each value once, under
// its new name.
func TestFlagAliases(t *testing.T) {
	var sink strings.Builder
	for _, pair := range [][2][]string{
		{{"--transport=shm"}, {"--provider=shm"}},
		{{"--nics=2"}, {"--nets-per-gpu=2"}},
		{{"--backend=cuda-emu", "--poll=spin"}, {"--backend=cuda-emu", "--spin"}},
		{{"--backend=cuda-emu", "--poll=auto"}, {"--backend=cuda-emu", "--spin=false"}},
		{{"-v"}, {"--verbose"}},
		{{"--list-transports"}, {"--list-transports"}},
		{{"--world-size=2", "--spawn", "--transport=ipc", "--nics=2", "--backend=cuda-emu", "--poll=spin", "-v"},
			{"--world-size=2", "--spawn", "--provider=ipc", "--nets-per-gpu=2", "--backend=cuda-emu", "--spin", "--verbose"}},
	} {
		a, err := parseFlags(pair[0], noEnv, &sink)
		if err != nil {
			t.Fatalf("%v: %v", pair[0], err)
		}
		b, err := parseFlags(pair[1], noEnv, &sink)
		if err != nil {
			t.Fatalf("%v: %v", pair[1], err)
		}
		if !reflect.DeepEqual(a.spec, b.spec) || a.verbose != b.verbose || a.poll != b.poll || a.listTransports != b.listTransports {
			t.Errorf("%v: %+v\n%v: %+v", pair[0], a, pair[1], b)
		}
		if ca, cb := a.childArgs(), b.childArgs(); !reflect.DeepEqual(ca, cb) {
			t.Errorf("child args differ:\n%q\n%q", ca, cb)
		}
	}
	o, err := parseFlags([]string{"--world-size=2", "--spawn", "--provider=ipc", "--nets-per-gpu=2", "--backend=cuda-emu", "--spin", "--verbose"}, noEnv, &sink)
	if err != nil {
		t.Fatal(err)
	}
	if o.spec.Transport != "ipc" || o.spec.Config.NICsPerGPU != 2 || !o.spec.Spin || !o.verbose {
		t.Fatalf("old spellings: %+v", o)
	}
	for _, a := range o.childArgs() {
		for _, alias := range []string{"--provider=", "--nets-per-gpu=", "--spin=", "--verbose=", "--list-transports="} {
			if strings.HasPrefix(a, alias) {
				t.Errorf("child args carry the alias %s", a)
			}
		}
	}
	// The transports subcommand is --list-transports.
	var sub, flag, errOut strings.Builder
	if code := run([]string{"transports"}, &sub, &errOut); code != 0 || sub.Len() == 0 {
		t.Fatalf("transports: exit %d, %q %q", code, sub.String(), errOut.String())
	}
	if code := run([]string{"--list-transports"}, &flag, &errOut); code != 0 || flag.String() != sub.String() {
		t.Fatalf("--list-transports: exit %d, %q, want %q", code, flag.String(), sub.String())
	}
	if code := run([]string{"transports", "x"}, &flag, &errOut); code != 2 {
		t.Fatalf("transports x: exit %d", code)
	}
	// -h names the aliases as such.
	var help strings.Builder
	if _, err := parseFlags([]string{"-h"}, noEnv, &help); err == nil {
		t.Fatal("-h: no error")
	}
	for _, want := range []string{"-provider string\n    \talias of --transport", "-nets-per-gpu int\n    \talias of --nics",
		"-spin\n    \talias of --poll spin", "-verbose\n    \talias of -v", "-list-transports\n    \talias of the transports subcommand"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}
