package manager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Main is the whole program of a manager binary: it parses args, runs
// until SIGINT or SIGTERM (a second signal kills at once), and returns the
// exit code: 0 after a clean shutdown, 2 for bad flags, 1 for any other
// failure. Errors are one line on stderr.
//
// Main, not Run, sets what belongs to the whole process: the signal
// handlers; the garbage collector's target, 40 (defaultGCPercent), unless
// the environment sets GOGC; and, with --profiling and
// --contention-profiling, the block profile rate (every blocking event is
// recorded for /debug/pprof/block, as MCM does). A program that runs the
// manager with New and Run sets what it wants of these itself.
func Main(name string, args []string, controllers Controllers, drivers Drivers) int {
	cfg, err := ParseFlags(name, args, controllers, drivers, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s (see %s -h)\n", name, oneLine(err.Error()), name)
		return 2
	}
	setGCPercent()
	if cfg.Profiling && cfg.ContentionProfiling {
		runtime.SetBlockProfileRate(1)
		defer runtime.SetBlockProfileRate(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first signal, the next one kills
	m, err := New(cfg, Options{Controllers: controllers, Drivers: drivers})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err.Error()))
		return 2
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err.Error()))
		return 1
	}
	return 0
}

// NewLogger returns a logr.Logger writing one text line per entry to w, at
// verbosity v and below.
func NewLogger(w io.Writer, v int) logr.Logger {
	var mu sync.Mutex
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if prefix != "" {
			fmt.Fprintf(w, "%s: %s\n", prefix, args)
		} else {
			fmt.Fprintln(w, args)
		}
	}, funcr.Options{LogTimestamp: true, TimestampFormat: time.RFC3339Nano, Verbosity: v})
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
