// Package cliflag holds the flag spellings fabric-debug and bench-a2a share,
// so the two tools take the same option the same way: --transport (old
// spelling --provider), --nics (--nets-per-gpu), --poll (--spin), -v and
// --verbose, and a transports listing (--list-transports). An old spelling
// stays as an alias, shown in -h as "alias of --NEW".
package cliflag
