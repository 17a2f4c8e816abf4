// Command demo shows the whole machine lifecycle on a local control plane:
// it builds (once, cached) the test-environment binaries, starts etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler in a temp dir,
// installs the machine CRDs, runs the reference manager in this process
// with the simulated cloud (--driver=sim, whose simulated kubelet turns VMs
// into Nodes of the same cluster), applies a Secret, a MachineClass and a
// MachineDeployment (RollingUpdate, maxSurge 1, maxUnavailable 0), and
// shows its machines coming up. Once all are Running it creates a second
// MachineClass and points the deployment at it, shows the rolling update
// wave by wave, and fails if available machines ever drop below what the
// strategy promises. Then it waits for Ctrl-C, stops everything and
// removes its temp files. `make run` runs it.
//
//	go run ./reference/demo [--machines 5] [--exit-when-running] [--demo-timeout 5m] [manager flags]
//
// With --control-kubeconfig it uses that cluster instead of starting one
// (without --target-kubeconfig the machines then stay Available: no
// simulated Nodes are put into a real cluster unless asked for), and
// deletes its deployment, classes and secret again on Ctrl-C.
//
// The manager runs in-process through package reference/manager, the same
// code path as the reference binary's main: one process to stop, nothing
// to build first, and its log goes to a file so that the terminal shows
// only the progress.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second Ctrl-C kills at once
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, with its exit code: 0 when done or
// interrupted, 1 when the demo failed, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	if cl.cfg.Profiling && cl.cfg.ContentionProfiling {
		// The block profile rate is the process's: the manager's Run leaves
		// it alone, and this binary sets it as the reference binary's Main
		// does.
		runtime.SetBlockProfileRate(1)
		defer runtime.SetBlockProfileRate(0)
	}
	d := &demo{cfg: cl.cfg, opts: cl.opts, out: stdout, external: cl.set["control-kubeconfig"]}
	if err := d.run(ctx, cl.set); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}
