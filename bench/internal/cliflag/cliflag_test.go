package cliflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) (transport, poll string, nics int, verbose bool, fs *flag.FlagSet) {
	t.Helper()
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&transport, "transport", "auto", "transport")
	Alias(fs, "provider", "transport")
	fs.IntVar(&nics, "nics", 1, "NICs")
	Alias(fs, "nets-per-gpu", "nics")
	fs.StringVar(&poll, "poll", "adaptive", "polling")
	Spin(fs, &poll, "adaptive")
	fs.BoolVar(&verbose, "v", false, "verbose")
	Alias(fs, "verbose", "v")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return transport, poll, nics, verbose, fs
}

// Each old spelling parses to what the new one does, and -h names the
// aliases as such.
func TestAliases(t *testing.T) {
	for _, pair := range [][2][]string{
		{{"--transport", "shm"}, {"--provider", "shm"}},
		{{"--nics", "2"}, {"--nets-per-gpu=2"}},
		{{"--poll", "spin"}, {"--spin"}},
		{{"--poll=adaptive"}, {"--spin=false"}},
		{{"-v"}, {"--verbose"}},
	} {
		tr1, p1, n1, v1, _ := parse(t, pair[0]...)
		tr2, p2, n2, v2, _ := parse(t, pair[1]...)
		if tr1 != tr2 || p1 != p2 || n1 != n2 || v1 != v2 {
			t.Errorf("%v gives %q %q %d %v, %v gives %q %q %d %v", pair[0], tr1, p1, n1, v1, pair[1], tr2, p2, n2, v2)
		}
	}
	// A later spelling overrides an earlier one, whichever name it uses.
	if tr, _, _, _, _ := parse(t, "--provider", "shm", "--transport", "ipc"); tr != "ipc" {
		t.Errorf("--provider shm --transport ipc: %q", tr)
	}
	if _, p, _, _, _ := parse(t, "--spin", "--poll", "adaptive"); p != "adaptive" {
		t.Errorf("--spin --poll adaptive: %q", p)
	}
	_, _, _, _, fs := parse(t)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"alias of --transport", "alias of --nics", "alias of --poll spin", "alias of -v"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, help.String())
		}
	}
	var aliases []string
	fs.VisitAll(func(f *flag.Flag) {
		if IsAlias(f) {
			aliases = append(aliases, f.Name)
		}
	})
	if strings.Join(aliases, ",") != "nets-per-gpu,provider,spin,verbose" {
		t.Errorf("aliases %v", aliases)
	}
}
