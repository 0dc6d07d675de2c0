package rendezvous_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// A program that works under torchrun, mpirun, srun, SpawnLocal, or alone:
// the launcher's environment says who it is, flags may override, and the
// ranks exchange their addresses with one AllGather.
func ExampleJoin() {
	cfg, err := rendezvous.ConfigFromEnv(func(string) (string, bool) { return "", false }) // os.LookupEnv in a program
	if err != nil {
		log.Fatal(err)
	}
	fs := flag.NewFlagSet("example", flag.ExitOnError)
	cfg.BindFlags(fs)
	_ = fs.Parse(nil) // os.Args[1:] in a program

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := rendezvous.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err) // names the missing ranks on a timeout
	}
	defer g.Close()
	addrs, err := g.AllGather(ctx, []byte("my NIC address"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d (%s) has %d address(es)\n", g.Rank(), g.WorldSize(), cfg.Source, len(addrs))
	// Output: rank 0 of 1 (default) has 1 address(es)
}

// Run four local ranks of this program (as bench-a2a --spawn does). Each
// child finds its rank with ConfigFromEnv(os.LookupEnv) and calls Join.
func ExampleSpawnLocal() {
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	if err := rendezvous.SpawnLocal(context.Background(), 4, []string{exe, "-child"}, nil); err != nil {
		log.Fatal(err) // a *SpawnError says which ranks failed and how
	}
}
