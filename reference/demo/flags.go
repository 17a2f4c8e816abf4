package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/mcmkit/mcm/reference/manager"
)

// options are the demo's own flags; the manager's flags come on top.
type options struct {
	machines        int
	exitWhenRunning bool
	timeout         time.Duration
}

// commandLine is what the demo was asked to do.
type commandLine struct {
	// cfg is the manager's configuration: its flags over the demo's
	// defaults (namespace mcm-demo, the simulated driver, a free port).
	cfg  manager.Config
	opts options
	// set holds the names of the flags given explicitly, since some
	// defaults depend on whether the user chose a value.
	set map[string]bool
}

// parseFlags reads the demo's flags and the manager's from args. When the
// demo must not run it returns ok false and the exit code: 0 after -help,
// 2 for a bad command line, which has been reported on stderr.
func parseFlags(args []string, stderr io.Writer) (cl commandLine, exitCode int, ok bool) {
	cfg := manager.DefaultConfig()
	cfg.Namespace = "mcm-demo"
	cfg.Driver = "sim"
	cfg.Port = 0
	var opts options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.BindFlags(fs)
	fs.IntVar(&opts.machines, "machines", 5, "replicas of the demo MachineDeployment")
	fs.BoolVar(&opts.exitWhenRunning, "exit-when-running", false, "stop and clean up once the rollout is complete (for scripts and tests)")
	fs.DurationVar(&opts.timeout, "demo-timeout", 0, "fail if the machines are not Running and rolled out within this long of the manager's start (0: no limit)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return commandLine{}, 0, false
		}
		return commandLine{}, 2, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if opts.machines < 1 {
		fmt.Fprintln(stderr, "demo: --machines must be at least 1")
		return commandLine{}, 2, false
	}
	return commandLine{cfg: cfg, opts: opts, set: set}, 0, true
}
