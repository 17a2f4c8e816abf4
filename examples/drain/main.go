// Command drain drains one node with the drain package: it prints the plan,
// then a line per pod event and, after every pass, the pods still
// remaining; it exits non-zero, naming what blocks, if the node is not
// drained within --timeout.
//
//	go run ./examples/drain --kubeconfig ~/.kube/config [--dry-run] [--timeout 10m] NODE
//
// It is meant to be read: it shows how custom tooling embeds the drain
// engine (New, Plan, then Pass in a loop with the State carried over).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/drain"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, clientFor)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitDrained = 0
	exitFailed  = 1 // not drained: timeout, refusal, API error
	exitUsage   = 2
)

// clientFor builds a client from a kubeconfig file, or from $KUBECONFIG and
// ~/.kube/config when the path is empty.
func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer,
	newClient func(kubeconfig string) (kubernetes.Interface, error)) int {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: drain [flags] NODE")
		fs.PrintDefaults()
	}
	var (
		kubeconfig   = fs.String("kubeconfig", "", "path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
		dryRun       = fs.Bool("dry-run", false, "print the plan and exit without changing anything")
		timeout      = fs.Duration("timeout", 10*time.Minute, "give up after this long, naming what blocks (0: wait forever)")
		forceAfter   = fs.Duration("force-after", 0, "drain deadline: force-delete remaining pods at deadline minus their grace period (0: never, budgets are respected)")
		daemonSets   = fs.Bool("drain-daemonsets", false, "evict DaemonSet pods too, last")
		refuseBare   = fs.Bool("refuse-unmanaged", false, "refuse to drain while pods without a controller are on the node")
		refuseLocal  = fs.Bool("refuse-local-storage", false, "refuse to drain while pods with emptyDir volumes are on the node")
		skipCordon   = fs.Bool("skip-cordon", false, "do not mark the node unschedulable")
		noVolumes    = fs.Bool("skip-volumes", false, "do not wait for volumes to detach")
		parallelism  = fs.Int("volume-parallelism", drain.DefaultVolumeParallelism, "pods with volumes in flight at once")
		pollInterval = fs.Duration("poll-interval", 2*time.Second, "how often to look again while pods terminate")
		verbosity    = fs.Int("v", 0, "log verbosity on stderr")
	)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	nodeName := fs.Arg(0)

	logger := funcr.New(func(prefix, args string) {
		fmt.Fprintln(stderr, strings.TrimSpace(prefix+" "+args))
	}, funcr.Options{Verbosity: *verbosity})
	ctx = logr.NewContext(ctx, logger)

	client, err := newClient(*kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitFailed
	}
	out := &printer{w: stdout}
	d, err := drain.New(client, drain.Options{
		SkipCordon:         *skipCordon,
		DrainDaemonSets:    *daemonSets,
		RefuseUnmanaged:    *refuseBare,
		RefuseLocalStorage: *refuseLocal,
		Timeout:            *forceAfter,
		PollInterval:       *pollInterval,
		Volumes:            drain.VolumeOptions{Skip: *noVolumes, Parallelism: *parallelism},
		OnEvent:            out.event,
	})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitUsage
	}

	plan, err := d.Plan(ctx, nodeName)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitFailed
	}
	printPlan(stdout, plan)
	if *dryRun {
		return exitDrained
	}

	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	res, err := drainNode(ctx, d, nodeName, out)
	return report(ctx, stdout, stderr, out, nodeName, *timeout, res, err)
}

// report prints how the drain of nodeName ended and returns the exit
// code: drained, or what still blocks it after an error, an interrupt or
// the timeout.
func report(ctx context.Context, stdout, stderr io.Writer, out *printer, nodeName string, timeout time.Duration, res drain.Result, err error) int {
	switch {
	case err == nil:
		out.line("%s", res.Message)
		return exitDrained
	case ctx.Err() != nil:
		why := "interrupted"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("timed out after %v", timeout)
		}
		fmt.Fprintf(stdout, "\nnode %s not drained: %s\n", nodeName, why)
		printBlockers(stdout, res)
		return exitFailed
	default:
		fmt.Fprintln(stderr, "error:", err)
		printBlockers(stdout, res)
		return exitFailed
	}
}

// drainNode runs passes until the node is drained, carrying the state from
// one pass to the next, and prints the remaining pods whenever the summary
// changes. It is what drain.Drainer.Drain does, plus progress output.
func drainNode(ctx context.Context, d *drain.Drainer, nodeName string, out *printer) (drain.Result, error) {
	var (
		state drain.State
		last  drain.Result
	)
	for {
		res, err := d.Pass(ctx, nodeName, state)
		state = res.State
		if res.Decisions != nil {
			last = res
		}
		if err != nil {
			return last, err
		}
		if res.Done {
			return res, nil
		}
		if res.Message != out.lastMessage {
			out.lastMessage = res.Message
			out.line("%s", res.Message)
		}
		if res.Remaining[drain.ActionRefuse] > 0 {
			return res, fmt.Errorf("%w: %s", drain.ErrRefused, res.Message)
		}
		timer := time.NewTimer(time.Until(res.NextCheck))
		select {
		case <-ctx.Done():
			timer.Stop()
			return last, ctx.Err()
		case <-timer.C:
		}
	}
}

// printer writes timestamped progress lines.
type printer struct {
	w           io.Writer
	lastMessage string
}

func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(p.w, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (p *printer) event(e drain.Event) {
	p.line("%-18s %s: %s", e.Type, subject(e), e.Message)
}

func subject(e drain.Event) string {
	if e.Pod.IsZero() {
		return strings.Join(e.Volumes, ",")
	}
	return e.Pod.String()
}

// printPlan prints one line per pod, the pods to drain by order group
// first, then the skipped ones, and the summary.
func printPlan(w io.Writer, plan drain.Plan) {
	decisions := slices.Clone(plan.Decisions)
	rank := func(d drain.Decision) int {
		if d.Action == drain.ActionSkip {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(decisions, func(a, b drain.Decision) int {
		if r := rank(a) - rank(b); r != 0 {
			return r
		}
		if a.Action != drain.ActionSkip && a.Group != b.Group {
			if a.Group.Less(b.Group) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Pod.String(), b.Pod.String())
	})
	deadline := "no deadline, budgets are respected"
	if !plan.Deadline.IsZero() {
		deadline = "deadline " + plan.Deadline.Local().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "Plan for node %s, %s", plan.Node, deadline)
	if plan.Unreachable {
		fmt.Fprint(w, ", node unreachable (fast path)")
	}
	fmt.Fprintln(w, ":")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tACTION\tGROUP\tWHY")
	for _, d := range decisions {
		group := d.Group.String()
		if d.Action == drain.ActionSkip {
			group = "-"
		}
		why := d.Reason
		if !d.ForceAt.IsZero() {
			why += fmt.Sprintf(" (force-delete at %s)", d.ForceAt.Local().Format("15:04:05"))
		}
		if d.Warning != "" {
			why += " [warning: " + d.Warning + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Pod, d.Action, group, why)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, plan.Message)
	fmt.Fprintln(w)
}

// printBlockers lists every pod that keeps the drain from being done, and
// the volume waits.
func printBlockers(w io.Writer, res drain.Result) {
	if res.Decisions == nil {
		return
	}
	fmt.Fprintln(w, res.Message)
	for _, d := range res.Decisions {
		if d.Action == drain.ActionSkip || d.Action == drain.ActionGone {
			continue
		}
		line := fmt.Sprintf("  %s: %s", d.Pod, d.Action)
		if d.Reason != "" {
			line += " - " + d.Reason
		}
		if d.Error != "" {
			line += " (" + d.Error + ")"
		}
		fmt.Fprintln(w, line)
	}
	for _, v := range res.Volumes {
		fmt.Fprintf(w, "  volumes %s: waiting to %s\n", strings.Join(v.Volumes, ", "), strings.ToLower(string(v.Phase)))
	}
}
