package sysreport_test

import (
	"log"
	"os"

	"github.com/ferryrdma/ferry/bench/internal/sysreport"
	"github.com/ferryrdma/ferry/efa"
)

// What `fabric-debug info` does: collect with the providers the program
// links, then print. The output depends on the machine, so it is not
// checked here; TestThisMachine checks it.
func ExampleCollect() {
	r, err := sysreport.Collect(sysreport.Options{
		LibfabricVersion: efa.Version,
		Transports:       efa.Transports,
		// VerbsDevices, GPUs: adapters over verbs.Devices and cuda.Devices.
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.WriteText(os.Stdout); err != nil {
		log.Fatal(err)
	}
}
