// Package flags is the reference manager's configuration and its
// compatibility with MCM's command lines: Config has one field per flag;
// BindFlags defines every flag of MCM's two processes (v0.62.1), with MCM's
// name, type and default, and ours; Parse takes MCM's spellings too
// (--machine_drain_timeout, -v3) and names MCM's flags that mean nothing
// here in Config.IgnoredFlags; Validate refuses what MCM refuses, and
// what would not work here, in one line that names each offending flag.
//
// The flags themselves are documented in package reference/manager, whose
// Config, DefaultConfig and ParseFlags are this package's.
//
// # Usage
//
//	cfg, err := flags.Parse("mcm", os.Args[1:], tables, os.Stdout) // tables: the controllers and drivers a binary has
//
// or, with flags of one's own beside the manager's:
//
//	cfg := flags.Default()
//	cfg.BindFlags(fs)
//	fs.Parse(args)
//	err := flags.Validate(cfg, tables)
package flags
