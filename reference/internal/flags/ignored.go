package flags

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// An ignoredFlag is a flag of MCM's machine-controller-manager or
// machine-controller that means nothing here. It is accepted, with MCM's
// type and default, so that MCM's command lines work unchanged; a value
// MCM would refuse is refused too. Given, it is named in Config.IgnoredFlags
// and so in the warning Run logs.
type ignoredFlag struct {
	name string
	// kind names the value's type in -h.
	kind string
	// value parses as MCM does and checks what MCM checks; its String is
	// MCM's default.
	value func() flag.Value
	// why it means nothing here, for -h.
	why string
}

// ignoredFlags are MCM's flags that mean nothing here, and why.
var ignoredFlags = []ignoredFlag{
	{"cloud-provider", "string", func() flag.Value { return new(stringValue) }, "MCM reads it nowhere; the cloud is --driver"},
	{"controller-start-interval", "duration", func() flag.Value { return nonNegativeDuration(0) }, "MCM reads it nowhere"},
	{"min-resync-period", "duration", func() flag.Value { return nonNegativeDuration(12 * time.Hour) },
		"informers here never resync: each controller requeues what time drives by itself (a settled machine every 10m)"},
	{"log-flush-frequency", "duration", func() flag.Value { return nonNegativeDuration(5 * time.Second) },
		"the log is written line by line, unbuffered: there is nothing to flush"},
	{"vmodule", "pattern=N,...", func() flag.Value { return new(moduleSpec) }, "the log has one verbosity, -v, for every file"},
}

// bindIgnored defines the ignoredFlags on fs; each one given is appended
// to c.IgnoredFlags (once) when fs is parsed.
func (c *Config) bindIgnored(fs *flag.FlagSet) {
	for _, f := range ignoredFlags {
		fs.Var(&ignoredValue{Value: f.value(), name: f.name, seen: &c.IgnoredFlags}, f.name, ignoredUsage+", a `"+f.kind+"`: "+f.why)
	}
}

// ignoredUsage starts the help text of every ignored flag.
const ignoredUsage = "(ignored, accepted for compatibility with MCM)"

// ignoredValue records that its flag was given.
type ignoredValue struct {
	flag.Value
	name string
	seen *[]string
}

func (v *ignoredValue) String() string {
	if v == nil || v.Value == nil {
		return "" // the zero value flag.PrintDefaults makes
	}
	return v.Value.String()
}

func (v *ignoredValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	if !slices.Contains(*v.seen, v.name) {
		*v.seen = append(*v.seen, v.name)
	}
	return nil
}

// IsBoolFlag is false: none of the ignored flags is a bool, and the
// embedded Value must not make one look like it.
func (v *ignoredValue) IsBoolFlag() bool { return false }

type stringValue string

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }

// durationValue is a duration that, as MCM checks, must not be negative.
type durationValue time.Duration

func nonNegativeDuration(d time.Duration) *durationValue { v := durationValue(d); return &v }

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("parse error")
	}
	if v < 0 {
		return fmt.Errorf("must not be negative")
	}
	*d = durationValue(v)
	return nil
}

// moduleSpec is klog's --vmodule syntax: comma-separated pattern=N.
type moduleSpec string

func (m *moduleSpec) String() string { return string(*m) }
func (m *moduleSpec) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			continue
		}
		pattern, level, ok := strings.Cut(item, "=")
		if !ok || pattern == "" || level == "" {
			return fmt.Errorf("%q is not pattern=N", item)
		}
		if _, err := strconv.ParseInt(level, 10, 32); err != nil {
			return fmt.Errorf("%q: the level is not a number", item)
		}
	}
	*m = moduleSpec(s)
	return nil
}

// leaderElectFlags are meaningless with --leader-elect=false. MCM accepts
// them then, and deployments that turn election off for a single replica
// keep passing them: given, they are named among Config.IgnoredFlags.
var leaderElectFlags = []string{
	"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "leader-elect-resource-lock",
	"leader-elect-resource-namespace", "leader-elect-resource-name", "leader-elect-machine-controller-resource-name",
}
