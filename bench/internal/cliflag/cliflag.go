package cliflag

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// aliasPrefix starts the usage of every alias; IsAlias recognises it.
const aliasPrefix = "alias of "

// Alias registers alias on fs as a second name of the defined flag name:
// both set the same value, and -h lists the alias as "alias of --name" (-name for a one-letter name). A
// boolean flag's alias is boolean too (-alias alone sets it). It panics when
// name is not defined, which is a mistake in the program, not in its input.
func Alias(fs *flag.FlagSet, alias, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("cliflag: alias %q of undefined flag %q", alias, name))
	}
	dashes := "--"
	if len(name) == 1 {
		dashes = "-" // -v, as its own usage line spells it
	}
	fs.Var(f.Value, alias, aliasPrefix+dashes+name)
}

// IsAlias reports whether f was registered by Alias or Spin, so a program
// that forwards its flags to child processes passes each value once.
func IsAlias(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, aliasPrefix) }

// Spin registers --spin on fs as the boolean spelling of --poll (which must
// be defined, with poll its value): --spin sets --poll spin, --spin=false
// sets it back to off.
func Spin(fs *flag.FlagSet, poll *string, off string) {
	if fs.Lookup("poll") == nil {
		panic("cliflag: --spin without --poll")
	}
	fs.Var(spinValue{poll: poll, off: off}, "spin", aliasPrefix+"--poll spin (--spin=false: --poll "+off+")")
}

// spinValue is --spin: a boolean view of the --poll string.
type spinValue struct {
	poll *string
	off  string
}

func (v spinValue) IsBoolFlag() bool { return true }

func (v spinValue) String() string {
	if v.poll != nil && *v.poll == "spin" {
		return "true"
	}
	return "false"
}

func (v spinValue) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if on {
		*v.poll = "spin"
	} else {
		*v.poll = v.off
	}
	return nil
}
