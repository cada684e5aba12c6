// Command pyroscope-server runs Grafana Pyroscope, imported as a library,
// as one process with every module (target "all"). It takes Pyroscope's own
// flags, e.g. -server.http-listen-port and -storage.backend=filesystem.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/grafana/dskit/flagext"
	"github.com/prometheus/common/version"

	"github.com/grafana/pyroscope/pkg/cfg"
	"github.com/grafana/pyroscope/pkg/pyroscope"
	"github.com/grafana/pyroscope/pkg/usage"
	_ "github.com/grafana/pyroscope/pkg/util/build"
)

type config struct {
	pyroscope.Config `yaml:",inline"`
	showVersion      bool
	help, helpAll    bool
}

func (c *config) RegisterFlags(fs *flag.FlagSet) {
	c.Config.RegisterFlags(fs)
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&c.help, "help", false, "print the basic flags and exit")
	fs.BoolVar(&c.helpAll, "help-all", false, "print every flag, advanced ones too, and exit")
}

func (c *config) Clone() flagext.Registerer {
	cp := *c
	return &cp
}

func main() {
	var c config
	if err := cfg.DynamicUnmarshal(&c, os.Args[1:], flag.CommandLine); err != nil {
		fmt.Fprintf(os.Stderr, "pyroscope-server: config: %v\n", err)
		os.Exit(2)
	}
	if c.showVersion {
		fmt.Println(version.Print("pyroscope"))
		return
	}
	if c.help || c.helpAll {
		flag.CommandLine.SetOutput(os.Stdout)
		if err := usage.Usage(c.helpAll, &c); err != nil {
			fmt.Fprintf(os.Stderr, "pyroscope-server: usage: %v\n", err)
			os.Exit(1)
		}
		return
	}
	p, err := pyroscope.New(c.Config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pyroscope-server: %v\n", err)
		os.Exit(1)
	}
	if err := p.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "pyroscope-server: %v\n", err)
		os.Exit(1)
	}
}
