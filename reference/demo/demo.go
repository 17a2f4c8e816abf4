package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/reference/manager"
)

// demo is one run of the demo: the cluster it uses, the manager it runs in
// this process, and the clients that create and watch the demo objects.
type demo struct {
	cfg      manager.Config
	opts     options
	out      io.Writer
	external bool // against a cluster given by --control-kubeconfig

	tmp      string // the demo's own temp dir (manager log)
	kubectl  string
	restCfg  *rest.Config
	machines versioned.Interface
	core     kubernetes.Interface
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// run goes through the demo from start to clean-up: a control plane (or
// the given cluster), the manager, the demo objects, the live table until
// the end, then everything stopped and removed in reverse order.
func (d *demo) run(ctx context.Context, set map[string]bool) (err error) {
	if d.tmp, err = os.MkdirTemp("", "mcm-demo-"); err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(d.tmp); rmErr != nil && err == nil {
			err = rmErr
		}
	}()

	stopCluster, err := d.useCluster(ctx, set)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := stopCluster(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if !set["port"] {
		if d.cfg.Port, err = freePort(); err != nil {
			return err
		}
		d.cfg.Address = "127.0.0.1"
	}
	logPath := filepath.Join(d.tmp, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// New validates the configuration: before anything touches the cluster.
	m, err := manager.New(d.cfg, manager.Options{Logger: manager.NewLogger(logFile, d.cfg.Verbosity)})
	if err != nil {
		return err
	}
	if err := d.connect(); err != nil {
		return err
	}
	if d.external {
		d.printf("Installing the machine CRDs into %s...\n", d.restCfg.Host)
		if err := crds.Install(ctx, d.restCfg); err != nil {
			return fmt.Errorf("installing CRDs: %w", err)
		}
	}
	if err := d.apply(ctx); err != nil {
		return err
	}
	if d.external {
		defer d.deleteDemoObjects()
	}

	return d.runManager(ctx, m, logPath)
}

// useCluster points the manager at the cluster given by the flags, or
// starts a local control plane; stop stops that one.
func (d *demo) useCluster(ctx context.Context, set map[string]bool) (stop func() error, err error) {
	if d.external {
		if !set["target-kubeconfig"] {
			d.cfg.TargetKubeconfig = manager.NoTarget
			d.printf("No --target-kubeconfig: running without a target cluster, so machines become Available, not Running.\n")
			d.printf("Pass --target-kubeconfig (the same path is fine) to let simulated Nodes join that cluster.\n")
		}
		d.kubectl = "kubectl"
		if bin, err := controlplane.BinDir(); err == nil {
			d.kubectl = filepath.Join(bin, "kubectl")
		}
		return func() error { return nil }, nil
	}
	env, err := d.startControlPlane(ctx)
	if err != nil {
		return nil, err
	}
	d.cfg.ControlKubeconfig = env.Kubeconfig()
	if !set["target-kubeconfig"] {
		d.cfg.TargetKubeconfig = env.Kubeconfig()
	}
	return func() error {
		d.printf("Stopping the control plane...\n")
		return env.Stop()
	}, nil
}

// runManager runs m until the live table ends, then stops it: after the
// demo objects are gone when they live in the user's cluster, since
// deleting machines needs the manager.
func (d *demo) runManager(ctx context.Context, m *manager.Manager, logPath string) error {
	mctx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	managerDone := make(chan error, 1)
	go func() { managerDone <- m.Run(mctx) }()
	d.printf("Manager running in this process (--driver=%s, --namespace=%s)\n", d.cfg.Driver, d.cfg.Namespace)
	d.printf("  log:     %s\n", logPath)
	d.printf("  metrics: http://%s:%d/metrics   health: /healthz /readyz\n\n", d.cfg.Address, d.cfg.Port)

	watchErr := d.watch(ctx, managerDone)

	if d.external && !errors.Is(watchErr, errManagerStopped) {
		// Deleting machines needs the manager (finalizers): do it first,
		// after a failed rollout too, so that no machine is left behind.
		d.deleteDemoObjects()
	}
	d.printf("Stopping the manager...\n")
	start := time.Now()
	stopManager()
	select {
	case err := <-managerDone:
		if err != nil && watchErr == nil {
			watchErr = fmt.Errorf("manager: %w", err)
		}
		d.printf("Manager stopped in %v.\n", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		if watchErr == nil {
			watchErr = errors.New("manager did not stop within 10s")
		}
	}
	return watchErr
}

// freePort picks a port for the manager's metrics and health endpoints
// when none was given: the manager's default port may be held by another
// manager on this machine.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
