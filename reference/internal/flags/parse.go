package flags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Parse parses args into a Config that starts from Default and validates
// it against the tables t. Flags that contradict each other are an error.
// It returns flag.ErrHelp, after printing the usage to usage, for -h.
// MCM's spellings are accepted too: underscores for dashes in flag names
// (--machine_drain_timeout) and -v3 for -v=3, as MCM's flag library takes
// them.
func Parse(name string, args []string, t Tables, usage io.Writer) (Config, error) {
	c := Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.BindFlags(fs)
	fs.SetOutput(io.Discard) // errors are reported in one line by the caller
	fs.Usage = func() {}
	if err := fs.Parse(mcmSpellings(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(usage, name, fs)
			return c, err
		}
		if flagName, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return c, fmt.Errorf("unknown flag --%s: neither this manager's nor machine-controller-manager's", flagName)
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: %s takes flags only", fs.Arg(0), name)
	}
	if err := checkExplicit(fs, &c); err != nil {
		return c, err
	}
	return c, Validate(c, t)
}

// mcmSpellings rewrites the spellings MCM's flag library (pflag, with
// Kubernetes' word-separator normalization) accepts and Go's does not:
// --a_b for --a-b, and -vN, the short flag with its value attached, for
// -v=N. Values and everything after "--" are left alone.
func mcmSpellings(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		}
		flagName, value, hasValue := strings.Cut(a[len(dashes):], "=")
		if dashes == "-" && !hasValue && len(flagName) > 1 && flagName[0] == 'v' && isDigits(flagName[1:]) {
			out = append(out, "-v="+flagName[1:])
			continue
		}
		flagName = strings.ReplaceAll(flagName, "_", "-")
		if hasValue {
			flagName += "=" + value
		}
		out = append(out, dashes+flagName)
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// printUsage prints the flags of fs, the ignored ones of MCM in a group of
// their own at the end.
func printUsage(w io.Writer, name string, fs *flag.FlagSet) {
	used := flag.NewFlagSet(name, flag.ContinueOnError)
	ignored := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		to := used
		if strings.HasPrefix(f.Usage, ignoredUsage) {
			to = ignored
		}
		to.Var(f.Value, f.Name, f.Usage)
		to.Lookup(f.Name).DefValue = f.DefValue
	})
	fmt.Fprintf(w, "Usage of %s:\n", name)
	used.SetOutput(w)
	used.PrintDefaults()
	fmt.Fprintf(w, "\nFlags of machine-controller-manager accepted for compatibility and ignored (a warning at start-up names those given):\n")
	ignored.SetOutput(w)
	ignored.PrintDefaults()
}

// checkExplicit rejects flags that were set but cannot take effect, and
// adds those MCM takes without effect to c.IgnoredFlags.
func checkExplicit(fs *flag.FlagSet, c *Config) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !c.LeaderElect {
		for _, f := range leaderElectFlags {
			if set[f] {
				c.IgnoredFlags = append(c.IgnoredFlags, f)
			}
		}
	}
	if c.Port == 0 && set["profiling"] && c.Profiling {
		return errors.New("--profiling needs the HTTP server, but --port=0 disables it")
	}
	for _, f := range simFlags {
		if set[f] && c.Driver != "sim" {
			return fmt.Errorf("--%s is for --driver=sim, not %q", f, c.Driver)
		}
	}
	for _, f := range simKubeletFlags {
		if set[f] && c.TargetKubeconfig == NoTarget {
			return fmt.Errorf("--%s contradicts --target-kubeconfig=%s: without a target cluster there is no simulated kubelet", f, NoTarget)
		}
	}
	return nil
}

// simKubeletFlags configure the sim driver's simulated kubelet, which runs
// only with a target cluster.
var simKubeletFlags = []string{
	"sim-kubelet-qps", "sim-kubelet-burst", "sim-kubelet-parallelism", "sim-node-lease-duration", "sim-node-lease-renew-period", "sim-node-status-report-period",
}

// simFlags are meaningless with another driver than sim.
var simFlags = append([]string{"sim-state-file"}, simKubeletFlags...)
